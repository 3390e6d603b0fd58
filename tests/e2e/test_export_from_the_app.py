"""`--export` on a command with requests: `specmon demo` (the app, on a pty) serves specmon's own
/metrics while it answers, and the per-request series fill in (in `watch` they stay empty: watch
sends no requests). A port in use is one line and exit 2 before the app starts."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

SRC = str(Path(__file__).resolve().parents[2] / "src")
WAIT_S = 90.0  # bound on the demo answering under a loaded machine; not a timing assertion


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(page: str, name: str) -> float:
    total = 0.0
    for line in page.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_demo_export_serves_the_answers_series() -> None:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS="120", LINES="40", TERM="xterm-256color")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "specmon", "demo", "--speed", "20", "--max-tokens", "48",
         "--export", f"127.0.0.1:{port}"],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    output = bytearray()

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            output.extend(data)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + WAIT_S
        answered = timed = 0.0
        page = ""
        # An answer read at one instant (a loaded machine) has no decode speed to export: the
        # demo keeps answering, so wait for three that have one.
        while time.monotonic() < deadline and (answered < 3 or timed < 3):
            time.sleep(0.5)
            with contextlib.suppress(httpx.HTTPError):
                page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                answered = _metric(page, "specmon_request_acceptance_length_count")
                timed = _metric(page, "specmon_request_decode_tokens_per_second_count")
        assert answered >= 3 and timed >= 3, (
            f"{answered:g} answers, {timed:g} with a decode speed exported:\n{page[-2000:]}\n"
            f"{output.decode(errors='replace')[-2000:]}"
        )
        assert 'server="http://127.0.0.1:' in page  # labelled with the server's address
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(30)
    assert code == 130


def test_a_port_in_use_is_one_line_before_anything_runs() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=SRC)
        proc = subprocess.run(
            [sys.executable, "-m", "specmon", "demo", "--json", "--export", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "in use" in lines[0] and str(port) in lines[0], lines
