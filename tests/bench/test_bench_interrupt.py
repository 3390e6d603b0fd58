"""`specmon bench` and `specmon sweep` stopped by a signal in their measured phase keep what
was measured: the real command (`python -m specmon`, with its process's signal handlers) runs
against the simulator, is sent SIGINT, SIGTERM or SIGHUP once some requests have finished, and
must write the finished requests to every output asked for, marked interrupted, with the signal's
exit status.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.waiting import wait_for

from specmon.sim.server import SimConfig, start_in_thread

SRC = str(Path(__file__).resolve().parents[2] / "src")
WAIT_S = 90.0  # failure bounds on a loaded machine, not speed targets
EXIT_WAIT_S = 30.0
PLANNED = 200


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    # Slow enough that 200 requests take minutes; fast enough that a few finish in seconds.
    with start_in_thread(SimConfig(speed=20.0, n_spec=4, seed=2), log_sink=lambda _l: None) as s:
        yield s.url


class Lines:
    """A child's stderr (or stdout) read on a thread, line by line."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._ended = threading.Event()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        try:
            for raw in stream:  # type: ignore[attr-defined]
                with self._lock:
                    self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
        finally:
            self._ended.set()

    def read_to_the_end(self) -> None:
        """Until the reader has taken the last line (the child has exited, but its last lines
        may still be in the pipe: on a loaded machine the reader runs after the test)."""
        wait_for(self._ended.is_set, "the end of the child's output", timeout=WAIT_S)

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, predicate: object, what: str) -> None:
        """Until `predicate(the text so far)` holds; the text on giving up."""
        wait_for(
            lambda: predicate(self.text()),  # type: ignore[operator]
            what,
            timeout=WAIT_S,
            interval=0.05,
            detail=self.text,
        )


def _start(args: list[str]) -> tuple[subprocess.Popen[bytes], Lines, Lines]:
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS="160")
    proc = subprocess.Popen(
        [sys.executable, "-m", "specmon", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    return proc, Lines(proc.stdout), Lines(proc.stderr)


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(EXIT_WAIT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _measured(text: str) -> int:
    """Measured requests finished so far, from the plain progress lines."""
    return len(re.findall(r"(?:^| )measure +\d+/\d+ ok ", text, re.MULTILINE))


WORKLOAD = ["--input-len", "16", "--output-len", "256", "--ignore-eos", "--warmups", "0"]


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_bench_interrupted_writes_what_it_measured(
    sig: signal.Signals, sim_url: str, tmp_path: Path
) -> None:
    out_json, out_csv, out_md = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.md"
    args = ["bench", "--attach", sim_url, "--num-prompts", str(PLANNED), *WORKLOAD]
    args += ["--json", str(out_json), "--csv", str(out_csv), "--markdown", str(out_md)]
    proc, out, err = _start(args)
    err.wait_for(lambda t: _measured(t) >= 3, "3 measured requests")
    code = _stop(proc, sig)
    out.read_to_the_end()
    err.read_to_the_end()
    assert code == 128 + int(sig), f"exit {code}\n{err.text()}"
    text = err.text() + out.text()
    assert "Traceback" not in text and "nothing measured" not in text, text
    assert "exiting now" not in text, text  # the clean stop, not the watchdog's
    result = json.loads(out_json.read_text())
    done = result["summary"]["completed"]
    assert 3 <= done < PLANNED
    assert result["errors"]["interrupted"] is True
    assert result["config"]["num_prompts"] == PLANNED
    rows = list(csv.DictReader(out_csv.open()))
    assert sum(1 for r in rows if r["outcome"] == "ok") == done
    md = out_md.read_text()
    assert f"{done} of {PLANNED}" in md and "interrupted" in md.lower()
    assert f"{done} of {PLANNED} measured requests finished" in out.text()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sweep_interrupted_keeps_the_point_in_progress_as_partial(
    sig: signal.Signals, sim_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "sweep"
    args = ["sweep", "--point", f"0={sim_url}", "--point", f"4={sim_url}"]
    args += ["--num-prompts", "20", "--repeats", "1", *WORKLOAD, "--out", str(folder)]
    proc, out, err = _start(args)
    # The first point ends (20 requests), the second has measured some when the signal comes.
    err.wait_for(lambda t: _measured(t) >= 20 + 2, "the second point's second request")
    code = _stop(proc, sig)
    out.read_to_the_end()
    err.read_to_the_end()
    assert code == 128 + int(sig), f"exit {code}\n{err.text()}"
    text = err.text() + out.text()
    assert "Traceback" not in text and "exiting now" not in text, text
    runs = folder / "runs"
    assert (runs / "n0-c1-r1.json").is_file()  # the earlier point is kept whole
    assert not (runs / "n4-c1-r1.json").exists()  # the point in progress is not complete...
    partial = json.loads((runs / "n4-c1-r1.partial.json").read_text())  # ...but kept
    assert partial["errors"]["interrupted"] is True
    assert 2 <= partial["summary"]["completed"] < 20
    assert json.loads((folder / "summary.json").read_text())["interrupted"] is True
    # --resume measures the partial point again (not taken as done) and only it (its server
    # given again: a folder's URLs are never used on their own).
    resume = ["sweep", "--resume", str(folder), "--point", f"4={sim_url}"]
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", *resume],
        env=dict(os.environ, PYTHONPATH=SRC),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    measured_again = [ln for ln in proc.stderr.splitlines() if "repeat 1/1" in ln]
    assert measured_again == ["specmon sweep: n_spec=4 concurrency=1 repeat 1/1"], proc.stderr
    assert json.loads((runs / "n4-c1-r1.json").read_text())["summary"]["completed"] == 20
    assert not (runs / "n4-c1-r1.partial.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_host_mode_bench_interrupted_writes_and_stops_the_server(
    sig: signal.Signals, sim_vllm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host mode: the signal also stops the started server's whole group, nothing is left."""
    from tests.support.host_mode import alive

    monkeypatch.setenv("FAKE_SWEEP_SPEED", "20")
    out_json = tmp_path / "r.json"
    args = ["bench", "--vllm", str(sim_vllm), "--model", "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"]
    args += ["--skip-arg-check", "--port", "0", "--gpu", "none"]
    args += ["--num-prompts", str(PLANNED), *WORKLOAD]
    args += ["--json", str(out_json)]
    proc, out, err = _start(args)
    try:
        err.wait_for(lambda t: _measured(t) >= 2, "2 measured requests")
        code = _stop(proc, sig)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    out.read_to_the_end()
    err.read_to_the_end()
    assert code == 128 + int(sig), f"exit {code}\n{err.text()}"
    text = err.text() + out.text()
    assert "Traceback" not in text and "exiting now" not in text, text
    result = json.loads(out_json.read_text())
    assert result["errors"]["interrupted"] is True and result["summary"]["completed"] >= 2
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 10
    while [p for p in pids if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids and not [p for p in pids if alive(p)], "the hosted server outlived bench"


def test_a_stop_after_the_last_request_keeps_the_whole_run(
    sim_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal comes during the last /metrics scrape, when every request has finished: the
    run is returned whole (not dropped, not marked interrupted)."""
    import asyncio

    from specmon.bench.config import BenchConfig
    from specmon.bench.runner import run_bench
    from specmon.bench.servers import endpoint_for
    from specmon.sources.metrics_scraper import MetricsScraper

    original = MetricsScraper.scrape_until_generation
    main_task: list[asyncio.Task[object]] = []

    async def stopped_meanwhile(self: MetricsScraper, *args: object, **kwargs: object) -> object:
        main_task[0].cancel()  # what the stop signal's callback does
        await asyncio.sleep(0.05)
        return await original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MetricsScraper, "scrape_until_generation", stopped_meanwhile)
    config = BenchConfig(input_len=8, output_len=16, num_prompts=3, warmups=0, ignore_eos=True)

    async def go() -> object:
        task = asyncio.create_task(run_bench(endpoint_for(sim_url), config))
        main_task.append(task)
        return await task

    out = asyncio.run(go())
    assert not out.interrupted  # type: ignore[attr-defined]
    ended = [e for e in out.events if type(e).__name__ == "RequestEnded"]  # type: ignore[attr-defined]
    assert [e.outcome for e in ended] == ["ok"] * 3
