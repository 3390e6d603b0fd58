"""`specmon watch` and `specmon demo` end to end (in process, against the simulator)."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from specmon.cli.main import main
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.recording_player import read_recording


def test_watch_once_json_prints_one_snapshot(sim, capsys):
    assert main(["watch", "--attach", sim.url, "--once", "--json", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    snap = json.loads(out[0])
    assert snap["simulated"] is True
    server = snap["servers"][sim.url]
    assert server["status"] == "up"
    assert server["totals"]["generation_tokens"] is not None


def test_watch_once_without_json_prints_the_table_once(sim, capsys):
    """`--once` alone is for a person: the live view's table, once, not 2.5 kB of JSON."""
    assert main(["watch", "--attach", sim.url, "--once", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{")
    assert "SIMULATED" in out and sim.url in out and "up" in out
    assert out.count("specmon watch") == 1  # one frame


@pytest.fixture
def two_sims() -> Iterator[tuple[str, str]]:
    """Two simulators on one host (127.0.0.1, two ports)."""
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                start_in_thread(SimConfig(speed=50.0, seed=n), log_sink=lambda _l: None)
            ).url
            for n in (1, 2)
        ]
        yield urls[0], urls[1]


@pytest.mark.parametrize("columns", [80, 160])
def test_watch_once_prints_the_apps_servers_table(two_sims, capsys, monkeypatch, columns):
    """`--once` alone: one row per server with its port (two servers on one host read apart),
    in the order of the command line, latency in ms, nothing wider than the terminal."""
    first, second = two_sims
    monkeypatch.setenv("COLUMNS", str(columns))
    for order in ((second, first), (first, second)):
        argv = ["watch", "--attach", order[0], "--attach", order[1], "--once", "--interval", "0.1"]
        assert main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        ports = [url.rsplit(":", 1)[1] for url in order]
        rows = [
            n
            for n, line in enumerate(lines)
            for port in ports
            if f"127.0.0.1:{port} " in line and " up " in line
        ]
        assert len(rows) == 2, lines  # one row per server, not a row per rate
        assert [p for p in ports if f"127.0.0.1:{p} " in lines[rows[0]]] == [ports[0]]
        assert f"127.0.0.1:{ports[1]} " in lines[rows[1]]
        header = lines[rows[0] - 1].split()
        assert header[:4] == ["server", "state", "tok/s", "AL"]
        text = "\n".join(lines)
        assert "TTFT s" not in text and "latency p50/p95/p99 ms" in text
        latency = [line.split()[0] for line in lines if "TTFT" in line and "ITL" in line]
        assert latency == [f"127.0.0.1:{port}" for port in ports]  # a line each, in order
        assert max(len(line) for line in lines) <= columns


def test_watch_once_drops_columns_as_the_app_does(two_sims, capsys, monkeypatch):
    """A long host name at 60 columns: the app's layout for that width (server column first,
    then columns in the app's DROP_ORDER), the port still shown."""
    from specmon.ui.servers_text import header_line, layout_for

    first, _ = two_sims
    port = first.rsplit(":", 1)[1]
    nowhere = f"http://a-very-long-host-name-that-does-not-resolve.invalid:{port}"
    monkeypatch.setenv("COLUMNS", "60")
    argv = ["watch", "--attach", nowhere, "--metrics-url", first + "/metrics", "--once"]
    assert main([*argv, "--interval", "0.1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert header_line(layout_for(60)) in lines
    row = next(line for line in lines if " up " in line)
    assert row.split()[0].endswith(f"…:{port}")


def test_watch_survives_a_down_server_and_says_so(sim, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    code = main(
        ["watch", "--attach", sim.url, "--attach", dead, "--once", "--json", "--interval", "0.1"]
    )
    assert code == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["servers"][dead]["status"] == "down"
    assert snap["servers"][sim.url]["status"] == "up"


def test_watch_separate_metrics_url(sim, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    # the API lives nowhere, the metrics at the simulator: the scrape still works
    args = ["watch", "--attach", nowhere, "--metrics-url", sim.url + "/metrics", "--once", "--json"]
    assert main([*args, "--interval", "0.1"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["servers"][nowhere]["status"] == "up"


def exit_status(argv: list[str]) -> int:
    """The status `specmon ARGV` exits with (argparse's own errors raise SystemExit 2)."""
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


def test_watch_bad_arguments_are_one_line_errors(capsys):
    assert exit_status(["watch", "--attach", "ftp://x", "--once", "--json"]) == 2
    assert "http or https" in capsys.readouterr().err
    assert (
        exit_status(["watch", "--attach", "http://a", "--metrics-url", "u1", "--metrics-url", "u2"])
        == 2
    )
    assert "--metrics-url" in capsys.readouterr().err
    assert exit_status(["watch", "--attach", "http://a", "--gpu", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "argument --gpu: must be local, none or a dcgm-exporter http(s) URL" in err


def test_demo_runs_n_requests_records_and_leaves_no_threads(tmp_path, capsys):
    before = {t.ident for t in threading.enumerate()}
    path = tmp_path / "demo.ndjson.gz"
    code = main(
        ["demo", "--requests", "10", "--speed", "5", "--max-tokens", "32", "--record", str(path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out  # not a terminal: plain lines, no escape codes
    # one line per answer as it ends ("rN: ..."); a verdict given again later (a transition
    # judged against its neighbours, by how the answers happened to time) has a line of its own
    lines = [x for x in out.splitlines() if re.match(r"\[SIMULATED\] r\d+: ", x)]
    numbers = [int(x.split(":")[0].removeprefix("[SIMULATED] r")) for x in lines]
    # ten answers, each once, in order (the request counter is the process's: in a test run
    # that ran other sessions before, the first is not r1)
    assert numbers == list(range(numbers[0], numbers[0] + 10)), lines
    # 5f,1t,3d,1r: the three degraded answers are flagged, the fast ones are not (the
    # transition, r6, is flagged or not by how near the slow level its short answer timed).
    flagged = [i + 1 for i, x in enumerate(lines) if "VANILLA SPEED" in x]  # answers, in order
    assert {7, 8, 9} <= set(flagged), lines
    assert set(flagged).isdisjoint({1, 2, 3, 4, 10}), lines
    assert all("[SIMULATED]" in x for x in lines)
    rec = read_recording(path)
    assert rec.info.simulated is True and rec.problems == []
    after = {t.ident for t in threading.enumerate() if t.is_alive()}
    assert after <= before


def test_demo_bad_profile_is_a_clear_error(capsys):
    assert main(["demo", "--profile", "no-such-profile", "--requests", "1"]) == 2
    assert "no-such-profile" in capsys.readouterr().err


def test_recording_into_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "no-such-folder" / "session.ndjson"
    assert main(["demo", "--requests", "1", "--speed", "50", "--record", str(target)]) == 2
    err = capsys.readouterr().err
    assert "cannot record to" in err and str(target) in err
    assert "Traceback" not in err
    assert not target.exists()


def test_watch_refuses_to_overwrite_a_recording(sim, tmp_path, capsys):
    target = tmp_path / "kept.ndjson"
    target.write_text("earlier session\n")
    assert main(["watch", "--attach", sim.url, "--once", "--json", "--record", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert target.read_text() == "earlier session\n"


def test_watch_metrics_url_without_scheme_is_read_over_http(sim, capsys):
    # --attach accepts host:port without a scheme; --metrics-url is validated the same way, so it
    # must also be used as http://host:port/... (not sent to httpx as the scheme "127.0.0.1").
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{s.getsockname()[1]}"
    bare = sim.url.removeprefix("http://") + "/metrics"
    args = ["watch", "--attach", nowhere, "--metrics-url", bare, "--once", "--json"]
    assert main([*args, "--interval", "0.1"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["servers"][nowhere]["status"] == "up"


def test_watch_interval_out_of_range_is_a_one_line_error(capsys):
    for value in ("inf", "1e308", "1e-9", "0"):
        assert (
            exit_status(
                ["watch", "--attach", "http://127.0.0.1:9", "--interval", value, "--once", "--json"]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert "--interval" in err
        assert "Traceback" not in err


def test_watch_record_carries_the_given_baseline(sim, tmp_path, capsys):
    """`watch --baseline X --record F`: the header says which baseline the session was judged
    against, so `replay F` judges with it; without --baseline (a simulated server never takes a
    stored one) the header has none."""
    with_baseline, without = tmp_path / "b.ndjson", tmp_path / "n.ndjson"
    argv = ["watch", "--attach", sim.url, "--once", "--json", "--interval", "0.1"]
    assert main([*argv, "--baseline", "123.4", "--record", str(with_baseline)]) == 0
    assert main([*argv, "--record", str(without)]) == 0
    header = json.loads(with_baseline.read_text().splitlines()[0])
    assert (header["baseline_tok_s"], header["baseline_from"]) == (123.4, "given")
    assert "baseline_tok_s" not in json.loads(without.read_text().splitlines()[0])
    capsys.readouterr()
    assert main(["replay", str(with_baseline), "--json"]) == 0
    session = json.loads(capsys.readouterr().out)["session"]
    assert (session["baseline_tok_s"], session["baseline_from"]) == (123.4, "recording")
