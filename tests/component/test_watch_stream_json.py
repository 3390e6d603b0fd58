"""`specmon watch --json` streaming mode, as a real subprocess against the simulator.

One JSON snapshot per line per interval until interrupted. SIGINT stops it with exit status 130
(documented in `specmon watch --help`), no process left; a reader that goes away (closed pipe)
stops it quietly with status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from specmon.sources.stream_client import ChatRequest, StreamClient

LINE_WAIT_S = 60.0  # bound on waiting for one line (startup included); not a timing assertion
EXIT_WAIT_S = 30.0


@pytest.fixture
def traffic(sim) -> Iterator[list[int]]:
    """Chat requests against the simulator, one after another, until the test ends.

    Yields the list of completion-token counts of the finished requests.
    """
    done: list[int] = []
    stop = threading.Event()

    async def loop() -> None:
        async with StreamClient(sim.url) as client:
            while not stop.is_set():
                ended = await client.chat(ChatRequest("Count to ten.", max_tokens=32), _drop)
                if ended.completion_tokens:
                    done.append(ended.completion_tokens)

    thread = threading.Thread(target=asyncio.run, args=(loop(),), daemon=True)
    thread.start()
    yield done
    stop.set()
    thread.join(30)


def _drop(_event: object) -> None:
    return None


def _start_watch(url: str, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "specmon", "watch", "--attach", url, "--json", "--interval", "0.3"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: we can check nothing of it is left
    )


def _line_reader(stream: IO[bytes]) -> queue.Queue[bytes | None]:
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(EXIT_WAIT_S)


def test_json_lines_stream_snapshots_whose_counters_advance_until_sigint(
    sim, traffic, tmp_path: Path
):
    err_path = tmp_path / "stderr.txt"
    with err_path.open("wb") as err:
        proc = _start_watch(sim.url, err)
    try:
        assert proc.stdout is not None
        lines = _line_reader(proc.stdout)

        def next_snapshot() -> dict:
            raw = lines.get(timeout=LINE_WAIT_S)
            assert raw is not None, f"watch ended early: {err_path.read_text()}"
            return json.loads(raw)

        snaps = [next_snapshot() for _ in range(3)]
        while not traffic:  # counters need something to count: read on until requests finished
            snaps.append(next_snapshot())
        snaps += [next_snapshot() for _ in range(2)]
        proc.send_signal(signal.SIGINT)
        code = proc.wait(EXIT_WAIT_S)
        rest = []
        while (raw := lines.get(timeout=LINE_WAIT_S)) is not None:
            rest.append(json.loads(raw))  # nothing torn: every line written is whole JSON
    finally:
        _kill(proc)

    assert code == 130
    assert _group_gone(proc.pid)
    stderr = err_path.read_text()
    assert "Traceback" not in stderr, stderr
    for snap in snaps + rest:
        assert snap["schema"] == "specmon-watch"
        assert snap["simulated"] is True
    times = [s["t"] for s in snaps if s["t"] is not None]
    assert len(times) >= 3 and times == sorted(times) and times[-1] > times[0]
    gen = [s["servers"][sim.url]["totals"]["generation_tokens"] for s in snaps]
    gen = [g for g in gen if g is not None]
    assert gen == sorted(gen), gen  # reset-corrected totals never go back
    assert gen[-1] > gen[0], gen
    assert snaps[-1]["servers"][sim.url]["status"] == "up"


def test_json_lines_stop_quietly_when_the_reader_goes_away(sim, tmp_path: Path):
    err_path = tmp_path / "stderr.txt"
    with err_path.open("wb") as err:
        proc = _start_watch(sim.url, err)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert json.loads(first)["schema"] == "specmon-watch"
        proc.stdout.close()  # like `specmon watch --json | head -n 1`
        code = proc.wait(EXIT_WAIT_S)
    finally:
        _kill(proc)
    assert code == 0
    assert _group_gone(proc.pid)
    stderr = err_path.read_text()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
