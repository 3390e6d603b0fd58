"""Ctrl-C and SIGTERM stop every long-running command within the bound, under load, leaving nothing.

Each command (`watch` live on a pty, `watch --json`, `demo`, `sim`) runs as the installed entry
point would (`python -m specmon`), in its own process group; once it is ready, two busy loops keep
both cores of the machine busy until it has stopped (they are held stopped the rest of the time, so
the start-ups and the other tests of the run do not pay for them). It is stopped with SIGINT and
with SIGTERM, several times each; the test asserts that it exits within SHUTDOWN_BOUND_S of the
signal with the documented status (130 after SIGINT, 143 after SIGTERM for the monitors; 0 for the
simulated server), that the stop was the clean one (not the watchdog's forced exit), that a
recording it was writing is complete, and that no process of its group is left.

The bound is the behaviour the issue asks for (2 s), not a speed goal: a clean stop takes well
under it (docs/benchmarks.md, "Shutdown under load"), and past 1.5 s the process ends by force.
"""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.real_vllm.guard import live_members
from tests.support.loopback import SilentServer
from tests.support.waiting import wait_for

from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.recording_player import read_recording

SHUTDOWN_BOUND_S = 2.0
READY_WAIT_S = 60.0  # bound on start-up under load (imports at half a core); not asserted
REPEATS = 3
SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass
class BusyCores:
    """Two processes spinning at 100%, held stopped (SIGSTOP) except while a command stops: the
    load is there when the signal arrives and while the command ends, and the start-ups before
    (and the tests on the other worker) do not pay for it."""

    hogs: list[subprocess.Popen[bytes]]

    @contextlib.contextmanager
    def on(self) -> Iterator[None]:
        for hog in self.hogs:
            hog.send_signal(signal.SIGCONT)
        # Busy, not merely told to be: each hog is out of the stopped state.
        wait_for(lambda: all(_state(h.pid) != "T" for h in self.hogs), "the busy loops to run")
        try:
            yield
        finally:
            for hog in self.hogs:
                hog.send_signal(signal.SIGSTOP)


def _state(pid: int) -> str:
    """The process's state letter in /proc/PID/stat (R running, S sleeping, T stopped ...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@pytest.fixture(scope="module")
def busy_cores() -> Iterator[BusyCores]:
    """Two busy loops, stopped until a test turns them on (each also ends itself in 15 min)."""
    spin = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    try:
        for hog in hogs:
            hog.send_signal(signal.SIGSTOP)
        yield BusyCores(hogs)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(30)


@pytest.fixture(scope="module")
def hung_url() -> Iterator[str]:
    """A server that accepts and never answers: the app stays "connecting…" all along."""
    server = SilentServer()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with start_in_thread(SimConfig(speed=20.0, n_spec=8, seed=1), log_sink=lambda _l: None) as s:
        yield s.url


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    output: bytearray = field(default_factory=bytearray)
    ready: threading.Event = field(default_factory=threading.Event)
    marker: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def feed(self, data: bytes) -> None:
        with self.lock:
            self.output += data
            if self.marker in self.output:
                self.ready.set()

    def text(self) -> str:
        with self.lock:
            return self.output.decode("utf-8", "replace")


def _reader(fd: int, run: Running) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the pty's other side closed
            break
        if not data:
            break
        run.feed(data)
    with contextlib.suppress(OSError):
        os.close(fd)


def _start(args: list[str], marker: bytes, *, tty: bool) -> Running:
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS="120", LINES="40", TERM="xterm-256color")
    if tty:
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmon", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        out_fd = master
    else:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmon", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        out_fd = os.dup(proc.stdout.fileno())
        proc.stdout.close()
    run = Running(proc, marker=marker)
    threading.Thread(target=_reader, args=(out_fd, run), daemon=True).start()
    return run


def _group_gone_within(pgid: int, seconds: float) -> list[int]:
    """The group's live pids once it is empty (then []) or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        alive = live_members(pgid)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


GROUP_GONE_S = 1.0
"""How long after the command's exit the processes that end with it may take to go."""

COMMANDS = {
    "watch-live": (["watch", "--interval", "0.3"], b"specmon watch", True),
    "watch-hung-server": (["watch", "--interval", "0.3"], b"specmon watch", True),
    "watch-json": (["watch", "--json", "--interval", "0.3"], b'"schema"', False),
    "demo": (["demo", "--speed", "20", "--max-tokens", "64"], b"[SIMULATED] r", False),
    "sim": (["sim", "--port", "0", "--speed", "50"], b"Ctrl-C stops it", False),
}
RECORDS = {"watch-json", "demo"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_signal_stops_the_command_within_the_bound_under_load(
    command: str,
    sig: signal.Signals,
    busy_cores: BusyCores,
    sim_url: str,
    hung_url: str,
    tmp_path: Path,
) -> None:
    base_args, marker, tty = COMMANDS[command]
    expected = 0 if command == "sim" else 128 + int(sig)
    for attempt in range(REPEATS):
        args = list(base_args)
        if command.startswith("watch"):
            args += ["--attach", hung_url if command == "watch-hung-server" else sim_url]
        record = tmp_path / f"{command}-{attempt}.ndjson.gz"
        if command in RECORDS:
            args += ["--record", str(record)]
        run = _start(args, marker, tty=tty)
        try:
            assert run.ready.wait(READY_WAIT_S), f"{command} never got ready:\n{run.text()}"
            with busy_cores.on():
                time.sleep(0.2 * attempt)  # a different moment of its work each time
                sent = time.monotonic()
                run.proc.send_signal(sig)
                try:
                    code = run.proc.wait(SHUTDOWN_BOUND_S)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        run.proc.wait(10)
                    took = time.monotonic() - sent
                    pytest.fail(
                        f"{command} still running {SHUTDOWN_BOUND_S} s after {sig.name} (exit "
                        f"{run.proc.returncode} after {took:.2f} s); output:\n"
                        f"{run.text()[-3000:]}"
                    )
                took = time.monotonic() - sent
                # Helpers that end with the command (multiprocessing's resource tracker, the
                # collector process) see it gone a moment later: the group must be empty soon.
                left = _group_gone_within(run.proc.pid, GROUP_GONE_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait(30)
        text = run.text()
        assert code == expected, f"{command} {sig.name}: exit {code}, took {took:.2f} s\n{text}"
        assert "exiting now" not in text, text  # the clean stop, not the watchdog's
        assert "Traceback" not in text, text
        assert left == [], f"{command} {sig.name}: still running {GROUP_GONE_S} s later: {left}"
        if command in RECORDS:
            recording = read_recording(record)
            assert recording.problems == [], recording.problems  # closed whole: gzip trailer
            assert recording.info.simulated is True
