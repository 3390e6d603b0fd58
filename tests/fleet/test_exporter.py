"""specmon's own exporter: the numbers only specmon derives, served on /metrics, scraped by the
real Prometheus of the fleet tests; the `--export` address rules and its port-in-use error."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest
from tests.support.fleet import StartPrometheus
from tests.support.specmon_cli import run_specmon

from specmon.core.session_state import SessionState
from specmon.runtime.exporter import Exporter, ExporterError, parse_listen
from specmon.runtime.monitor import Monitor, Target
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.addresses import is_loopback
from specmon.sources.stream_client import ChatRequest


def query(prom_url: str, q: str) -> list[dict]:
    r = httpx.get(prom_url + "/api/v1/query", params={"query": q}, timeout=10)
    r.raise_for_status()
    return r.json()["data"]["result"]


PANELS = Path(__file__).resolve().parents[2] / "docs" / "grafana-specmon-panels.json"


def panel_results(prom_url: str) -> dict[str, list[dict]]:
    """Each query of the shipped Grafana panels, with Grafana's variables filled in."""
    out = {}
    for panel in json.loads(PANELS.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$server", ".*")
            out[f"{panel['title']} {target['refId']}"] = query(prom_url, expr)
    return out


def test_parse_listen_defaults_to_loopback_and_9464() -> None:
    assert parse_listen(":9464") == ("127.0.0.1", 9464)
    assert parse_listen("9500") == ("127.0.0.1", 9500)
    assert parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("", ":0", "host:", "host:99999", "[::1]9464", "x:y"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_a_port_in_use_is_one_line_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ExporterError, match=r"in use"):
            Exporter().serve("127.0.0.1", port)
        with start_in_thread(SimConfig(speed=50.0, n_spec=4), log_sink=lambda _l: None) as sim:
            done = run_specmon(
                "watch", "--attach", sim.url, "--json", "--export", f"127.0.0.1:{port}"
            )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"specmon watch: cannot serve /metrics on 127.0.0.1:{port}: in use"
    ]


def test_exporter_series_are_queryable_in_the_real_prometheus(
    start_prometheus: StartPrometheus,
) -> None:
    requests = 30
    with start_in_thread(
        SimConfig(speed=3.0, n_spec=8, seed=1, schedule="cycle:5f,1t,3d,1r"),
        log_sink=lambda _l: None,
    ) as sim:
        # A vanilla baseline no request can beat: every request is flagged (net loss, or AL≈1
        # on the degraded ones), so the flag counters have something to count.
        monitor = Monitor(
            [Target(sim.url)], lambda info: SessionState(info, baseline_tok_s=1e9), interval=0.5
        )
        exporter = Exporter()
        exporter.serve("127.0.0.1", 0)
        try:
            monitor.start()
            exporter.follow(monitor.view, interval=0.2)
            prom = start_prometheus({"specmon": [f"127.0.0.1:{exporter.port}"]})
            monitor.prompt_loop([ChatRequest("tell me", max_tokens=48)], count=requests).result(120)
            view = monitor.view(fresh=True)
            time.sleep(0.5)
            exporter.update(view)
            page = httpx.get(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5).text
            prom.wait_for_scrapes(f"specmon_requests_total >= {requests}", 1)
            time.sleep(1.5)
            al_count = query(prom.url, "sum(specmon_request_acceptance_length_count)")
            tok_count = query(prom.url, "sum(specmon_request_decode_tokens_per_second_count)")
            flagged = query(prom.url, "sum by (reason) (specmon_vanilla_speed_requests_total)")
            cycle = query(prom.url, "specmon_degradation_cycle_period_requests")
            detected = query(prom.url, "specmon_degradation_cycle_detected")
            panels = panel_results(prom.url)
            p50 = query(
                prom.url,
                "histogram_quantile(0.5, sum by (le) (specmon_request_acceptance_length_bucket))",
            )
        finally:
            exporter.stop()
            monitor.stop()
    server = f'server="{sim.url}"'
    assert server in page
    assert float(al_count[0]["value"][1]) == requests
    # One decode-speed observation per answer that has a decode speed (an answer read at one
    # instant on a loaded machine has none, and is not judged on speed).
    timed = [r for r in view.rows if r.decode_tok_s is not None]
    assert timed and float(tok_count[0]["value"][1]) == len(timed)
    reasons = {r["metric"]["reason"]: float(r["value"][1]) for r in flagged}
    assert all(r.vanilla and r.vanilla.flagged for r in timed)
    flagged_rows = sum(1 for r in view.rows if r.vanilla and r.vanilla.flagged)
    assert reasons.get("net_loss", 0) + reasons.get("acceptance_near_zero", 0) >= flagged_rows
    # The gauges say what the view's cycle report says (its detection is tested in
    # tests/unit/test_cycle.py; here, and with a detected cycle below, that it is exported).
    assert view.cycle is not None
    assert float(detected[0]["value"][1]) == float(view.cycle.detected)
    period = float(cycle[0]["value"][1])
    assert period == view.cycle.period if view.cycle.detected else period != period  # NaN
    assert 1.0 <= float(p50[0]["value"][1]) <= 9.0
    # The sample Grafana panels' queries run in the real Prometheus (an invalid one raises) and
    # find the series (the cycle panel only shows a detected cycle).
    empty = [k for k, v in panels.items() if not v and not k.startswith("Degradation")]
    assert len(panels) == 7 and empty == []
    # Each request is counted once, however often the view is read.
    exporter.update(view)
    assert exporter.requests.labels(sim.url, "ok")._value.get() == requests


def test_a_detected_cycle_is_exported_with_its_period() -> None:
    from dataclasses import replace

    from specmon.core.events import SessionInfo
    from specmon.core.views import CycleView

    view = SessionState(SessionInfo(server="http://gpu:8000")).view()
    exporter = Exporter()
    exporter.update(replace(view, cycle=CycleView(30, 150.0, False)))
    assert exporter.cycle.labels("http://gpu:8000")._value.get() == 0.0
    cycle = CycleView(30, 150.0, True, period=10, cycles=3, share_degraded=0.3)
    exporter.update(replace(view, cycle=cycle))
    assert exporter.cycle.labels("http://gpu:8000")._value.get() == 1.0
    assert exporter.cycle_period.labels("http://gpu:8000")._value.get() == 10.0
    assert exporter.cycle_share.labels("http://gpu:8000")._value.get() == 0.3


def test_watch_export_serves_metrics_and_says_where(start_prometheus: StartPrometheus) -> None:
    import subprocess
    import sys

    from tests.support.prometheus import free_port
    from tests.support.specmon_cli import SRC

    port = free_port()
    with start_in_thread(SimConfig(speed=50.0, n_spec=4), log_sink=lambda _l: None) as sim:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specmon",
                "watch",
                "--attach",
                sim.url,
                "--json",
                "--export",
                str(port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        )
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert json.loads(line)["schema"] == "specmon-watch"
            page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        finally:
            proc.terminate()
            _out, err = proc.communicate(timeout=10)
    assert "# TYPE specmon_request_acceptance_length histogram" in page
    assert "specmon_vanilla_speed_requests" in page
    assert f"serving /metrics on http://127.0.0.1:{port}/metrics (loopback only)" in err
