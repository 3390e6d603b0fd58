"""A sweep folder is shared, so `specmon sweep --resume DIR` (and `specmon card DIR`) read it as
untrusted data: a program it names is never run, a URL it lists is never sent a request (nor the
API key) unless the command line gives it again, no file is written through a symbolic link
planted in it, and every number read from it is range-checked (one line naming the file and the
field, no traceback, never 300 digits)."""

from __future__ import annotations

import json
import shutil
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.support.sim_servers import sims

from specmon.bench.card import RigCard, SweepRow, card_markdown
from specmon.bench.config import BenchConfig
from specmon.bench.render import bar_chart
from specmon.bench.sweep import SweepSpec, SweepStore
from specmon.bench.vllm_dynamic import dynamic_config
from specmon.cli.main import main
from specmon.core.per_batch_k import ScheduleError

PROFILE = "gemma4-26b-rtx5090m"
MODEL = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"
TINY = ["--repeats", "1", "--num-prompts", "2", "--warmups", "0", "--input-len", "16",
        "--output-len", "32", "--ignore-eos", "--gpu", "none"]  # fmt: skip
SECRET = "sk-never-to-the-folder-0123456789"


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sweep of attached servers: n_spec 0 and 4 at concurrency 1 and 2 (its servers
    are gone afterwards: the URLs it lists answer nothing)."""
    folder = tmp_path_factory.mktemp("finished") / "sweep"
    with sims(PROFILE, (0, 4), speed=50.0) as urls:
        code = main(["sweep", "--n-spec", "0,4", "--attach", urls[0], "--attach", urls[4],
                     "--concurrency", "1,2", *TINY, "--out", str(folder)])  # fmt: skip
    assert code == 0
    return folder


@pytest.fixture
def folder(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished sweep to tamper with."""
    copy = tmp_path / "shared"
    shutil.copytree(finished, copy)
    return copy


def edit_json(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# ---------------------------------------------------------------- programs and environment


def planted_host_folder(tmp_path: Path, marker: Path) -> tuple[Path, Path]:
    """A host-mode sweep folder whose sweep.json names a planted script as vllm (it would
    create `marker`), with an environment and vLLM arguments of its own."""
    evil = tmp_path / "planted" / "vllm"
    evil.parent.mkdir()
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    evil.chmod(evil.stat().st_mode | stat.S_IXUSR)
    flags = {
        "model": MODEL, "method": "ngram", "vllm": str(evil), "skip_arg_check": True,
        "env": [["LD_PRELOAD", str(tmp_path / "planted" / "x.so")]],
        "vllm_args": ["--trust-remote-code", "--x=\x1b]0;title\x07\nforged line"],
        "spec_option": [], "port": 0,
    }  # fmt: skip
    spec = SweepSpec(
        (4,), (1,), 1, BenchConfig(num_prompts=2), {}, (), {"flags": flags, "model": MODEL}
    )
    folder = tmp_path / "shared"
    SweepStore(folder).create(spec)
    return folder, evil


def test_a_program_named_by_the_folder_is_shown_never_run(tmp_path, capsys) -> None:
    marker = tmp_path / "ran"
    folder, evil = planted_host_folder(tmp_path, marker)
    assert main(["sweep", "--resume", str(folder)]) == 2
    line = one_line(capsys.readouterr().err)
    assert not marker.exists()
    assert "not trusted" in line and f"--vllm {evil}" in line  # shown, to check and give again
    assert "--env LD_PRELOAD=" in line and "-- --trust-remote-code" in line
    assert "\x1b" not in line and "\u241b]0;title" in line  # shown literally, on one line


def test_host_flags_that_differ_from_the_folders_are_refused(sim_vllm, tmp_path, capsys) -> None:
    marker = tmp_path / "ran"
    folder, evil = planted_host_folder(tmp_path, marker)
    argv = ["sweep", "--resume", str(folder), "--model", MODEL, "--method", "ngram",
            "--vllm", str(sim_vllm), "--skip-arg-check"]  # fmt: skip
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert not marker.exists() and not (tmp_path / "starts").exists()  # nothing started
    assert f"--vllm (folder: --vllm {evil}; given: --vllm {sim_vllm})" in line
    assert "--env (folder: --env LD_PRELOAD=" in line and "given: none" in line
    assert "-- VLLM_ARGS" in line and "--out" in line


# ---------------------------------------------------------------- URLs and the API key


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]]

    def _any(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        self.send_error(404)

    do_GET = do_POST = _any

    def log_message(self, *_args: object) -> None:
        return None


@pytest.fixture
def listener() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A server on 127.0.0.1 recording every request's path and Authorization header."""
    handler = type("Handler", (_Recorder,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


def point_4_at(folder: Path, url: str) -> None:
    """The folder lists `url` as point 4's server, and point 4 is still to measure."""
    edit_json(folder / "sweep.json", lambda d: d["urls"].__setitem__("4", url))
    for run in (folder / "runs").glob("n4-*.json"):
        run.unlink()


@pytest.mark.parametrize("how", ["env", "flag"])
def test_the_key_never_goes_to_a_url_only_the_folder_lists(
    how, folder, listener, monkeypatch, capsys
) -> None:
    url, seen = listener
    point_4_at(folder, url)
    argv = ["sweep", "--resume", str(folder)]
    if how == "env":
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    else:
        argv += ["--api-key", SECRET]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert seen == []  # not one request, so no key
    assert f"--point 4={url}" in line and "not trusted" in line and SECRET not in line


def test_a_url_given_again_replaces_the_folders(folder, listener, monkeypatch, capsys) -> None:
    url, seen = listener
    point_4_at(folder, url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with sims(PROFILE, (4,), speed=50.0) as urls:
        code = main(["sweep", "--resume", str(folder), "--point", f"4={urls[4]}"])
    assert code == 0, capsys.readouterr().err
    assert seen == []
    assert sorted(p.name for p in (folder / "runs").glob("n4-*.json")) == [
        "n4-c1-r1.json", "n4-c2-r1.json"
    ]  # fmt: skip


def test_a_draft_the_folder_describes_must_be_given_again(folder, capsys) -> None:
    edit_json(
        folder / "sweep.json",
        lambda d: d.__setitem__("described", {"method": "dflash", "draft": "/tmp/planted"}),
    )
    assert main(["sweep", "--resume", str(folder)]) == 2
    assert "--method dflash --draft /tmp/planted" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- symbolic links


def test_planted_temporary_links_are_never_written_through(tmp_path, capsys) -> None:
    out = tmp_path / "sweep"
    (out / "runs").mkdir(parents=True)
    victims = {}
    for name in ("sweep.json.tmp", "summary.md.tmp", "summary.json.tmp", "failed.json.tmp",
                 "runs/n0-c1-r1.json.tmp"):  # fmt: skip
        victim = tmp_path / f"victim-{name.replace('/', '-')}"
        victim.write_bytes(b"the user's own file\n")
        (out / name).symlink_to(victim)
        victims[victim] = victim.read_bytes()
    with sims(PROFILE, (0,), speed=50.0) as urls:
        code = main(["sweep", "--point", f"0={urls[0]}", *TINY, "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    for victim, before in victims.items():
        assert victim.read_bytes() == before
    for name in ("sweep.json", "summary.md", "failed.json", "runs/n0-c1-r1.json"):
        assert (out / name).is_file() and not (out / name).is_symlink()


@pytest.mark.parametrize("planted", ["summary.md", "sweep.json", "runs/n0-c1-r1.json", "runs"])
def test_a_symlinked_file_or_runs_folder_is_refused(planted, folder, tmp_path, capsys) -> None:
    target = folder / planted
    victim = tmp_path / "victim"
    if target.is_dir():
        shutil.copytree(target, victim)
        (victim / "n4-c2-r1.json").unlink()  # a run the resume would write into the victim
        shutil.rmtree(target)
    else:
        victim.write_bytes(target.read_bytes())
        target.unlink()
    target.symlink_to(victim)
    before = {p: p.read_bytes() for p in ([victim] if victim.is_file() else victim.iterdir())}
    with sims(PROFILE, (0, 4), speed=50.0) as urls:
        code = main(["sweep", "--resume", str(folder), "--point", f"0={urls[0]}",
                     "--point", f"4={urls[4]}"])  # fmt: skip
    assert code == 2
    line = one_line(capsys.readouterr().err)
    assert "symbolic link" in line and planted in line
    assert {p: p.read_bytes() for p in before} == before
    if victim.is_dir():
        assert sorted(victim.iterdir()) == sorted(before)
    assert main(["card", str(folder)]) == 2  # read neither
    assert "symbolic link" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- numbers


def test_an_out_of_range_run_is_one_line_and_measured_again(folder, capsys) -> None:
    huge = folder / "runs" / "n4-c1-r1.json"
    edit_json(huge, lambda d: d["summary"].__setitem__("output_throughput", 1e308))
    edit_json(  # NaN (Python's json writes it) is "not measured", as null
        folder / "runs" / "n0-c2-r1.json",
        lambda d: d["summary"].__setitem__("output_throughput", float("nan")),
    )
    assert main(["card", str(folder)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(huge) in line and "summary.output_throughput 1e+308 is out of range" in line
    with sims(PROFILE, (4,), speed=50.0) as urls:
        code = main(["sweep", "--resume", str(folder), "--point", f"4={urls[4]}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err + captured.out
    said = [ln for ln in captured.err.splitlines() if str(huge) in ln]
    assert len(said) == 1 and said[0].endswith("; measured again")
    assert json.loads(huge.read_text())["summary"]["output_throughput"] < 1e7
    assert main(["card", str(folder)]) == 0
    assert "1" * 20 not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("points", [0, 99999], "points[1] 99,999 is out of range (0 to 64)"),
        ("repeats", 10**400, "repeats a 401-digit integer is out of range"),
        ("concurrencies", [1, "2"], "concurrencies[1] '2' is not an integer"),
    ],
    ids=["points", "repeats", "concurrencies"],
)
def test_a_tampered_sweep_json_is_one_line_and_nothing_is_written(
    field, value, said, folder, tmp_path, capsys
) -> None:
    text = (folder / "sweep.json").read_text()
    data = json.loads(text)
    data[field] = value
    if field == "points":  # its runs renamed so that the schedule would take k = 99999
        data["urls"] = {"0": data["urls"]["0"], "99999": data["urls"]["4"]}
        for run in (folder / "runs").glob("n4-*.json"):
            run.rename(run.with_name(run.name.replace("n4-", "n99999-")))
    (folder / "sweep.json").write_text(json.dumps(data))
    emitted = tmp_path / "dynamic.json"  # every run is there: nothing to measure, no server
    assert main(["sweep", "--resume", str(folder), "--emit-vllm-dynamic", str(emitted)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(folder / "sweep.json") in line and said in line
    assert not emitted.exists()


def test_an_integer_too_long_to_read_is_one_line(folder, capsys) -> None:
    run = folder / "runs" / "n0-c1-r1.json"
    run.write_text(run.read_text().replace('"completed": ', '"completed": ' + "9" * 5000, 1))
    assert main(["card", str(folder)]) == 2
    assert "too many digits" in one_line(capsys.readouterr().err)


def test_a_schedule_k_above_the_limit_is_never_emitted() -> None:
    summary = SimpleNamespace(
        schedule=[[1, 1, 99999], [2, 2, 8]],
        identity=SimpleNamespace(method="ngram", draft_model=None, extra={}),
        simulated=False,
    )
    with pytest.raises(ScheduleError, match="99999 is above 64"):
        dynamic_config(summary)  # type: ignore[arg-type]


def test_huge_numbers_are_drawn_and_written_bounded() -> None:
    lines = bar_chart([("n=0", 1e308, ""), ("n=4", 1e308, ""), ("n=8", float("inf"), "")])
    assert all(len(line) < 80 for line in lines)
    card = RigCard(
        kind="sweep", simulated=False, gpu=None, driver=None, vllm_version=None, model=None,
        draft_model=None, method=None, n_spec=4, server=None, acceptance_length=1e308,
        acceptance_rate=None, per_position=(), output_tok_s=1e308, decode_tok_s=None,
        ttft_ms=None, workload={"input_len": 1, "output_len": 1, "num_prompts": 1,
                                "concurrency": 1, "temperature": 0.0, "ignore_eos": False,
                                "dataset": "random"},
        thermals=(), serve_line=None,
        sweep=(SweepRow(4, 1, "", 1e308, 1e308, 1e308),),
    )  # fmt: skip
    md = card_markdown(card)
    assert "0" * 20 not in md and ">1e" in md
