"""The exit status of every long-running command after SIGINT, SIGTERM and SIGHUP, as the
commands' --help and docs/bad-input.md ("Signals") say: 130, 143 and 129 (128 + the signal;
`specmon sim`, a server, 0 after its clean stop). Each command runs as a process (`python -m
specmon`, this checkout's code) in two ways:

- in the app: on a pseudo-terminal that is its controlling terminal, as a shell runs it in the
  foreground (pty.fork). Ctrl-C pressed in the app (a key there, not a signal) counts as SIGINT.
  What the command says at the exit ("interrupted", "vLLM stopped (process group N gone)") must
  be on the shell's screen: written after the app's last alternate-screen-off sequence (a
  message written before it is lost with the app's screen, or overwritten at the cursor the
  sequence restores: the shell showed `EXIT=130ted`);
- without a terminal: stdin /dev/null, stdout and stderr a pipe (`watch --json`, the plain
  lines of demo and replay, bench, sweep, sim, web, serve's plain dashboard, chat's start-up
  lines).

And a command started in the background of an interactive shell (`specmon sim --port P > log
2>&1 &`, then `kill %1`) exits with its status instead of stopping on SIGTTOU (`Stopped (tty
output)`): its standard input is still the shell's terminal, which it must not set from the
background.

These tests start processes (the e2e folder's tiers: `process`, `slow`); each case takes a few
seconds. The simulator and the fake `vllm` (tests/support/fake_vllm.py) are shared by the module.
Waits are bounded by generous limits (failure bounds, not speed goals: the 2 s bound is
tests/e2e/test_shutdown_under_load.py's).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.host_mode import make_fake_vllm
from tests.support.waiting import wait_for

from specmon.sim.server import SimConfig, start_in_thread

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
SAMPLE = str(ROOT / "recordings" / "demo-cycle.ndjson.gz")
READY_LIMIT_S = 90.0
EXIT_LIMIT_S = 30.0
ALT_SCREEN_ON = b"\x1b[?1049h"
ALT_SCREEN_OFF = b"\x1b[?1049l"
CTRL_C = "ctrl-c"
"""Ctrl-C pressed in the app: the byte \\x03 typed on the terminal (raw mode: a key)."""


def _wait(predicate: Callable[[], bool], what: str, limit: float, text: Callable[[], str]) -> None:
    wait_for(
        predicate, what, timeout=limit, interval=0.05, detail=lambda: f"output:\n{text()[-3000:]}"
    )


class Command:
    """`python -m specmon ARGS` started on a pseudo-terminal that is its controlling terminal
    (`terminal`), or with stdin /dev/null and stdout and stderr one pipe; its output is read as
    it comes, and its exit status taken when it ends."""

    def __init__(self, args: list[str], env: dict[str, str], *, terminal: bool) -> None:
        argv = [sys.executable, "-m", "specmon", *args]
        self.output = bytearray()
        self._lock = threading.Lock()
        self.status: int | None = None
        self.popen: subprocess.Popen[bytes] | None = None
        if terminal:
            pid, fd = pty.fork()
            if pid == 0:  # the child: a session of its own, the pty its controlling terminal
                try:
                    winsize = struct.pack("HHHH", 40, 160, 0, 0)
                    fcntl.ioctl(0, termios.TIOCSWINSZ, winsize)
                    os.execve(sys.executable, argv, env)
                finally:
                    os._exit(127)
            self.pid, self.fd = pid, fd
        else:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            assert self.popen.stdout is not None
            self.pid, self.fd = self.popen.pid, os.dup(self.popen.stdout.fileno())
            self.popen.stdout.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the pty's other side is closed
                break
            if not data:
                break
            with self._lock:
                self.output += data
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def raw(self) -> bytes:
        with self._lock:
            return bytes(self.output)

    def text(self) -> str:
        return self.raw().decode("utf-8", "replace")

    def poll(self) -> int | None:
        if self.status is None:
            if self.popen is not None:
                self.status = self.popen.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
                if pid and os.WIFSTOPPED(status):
                    name = signal.Signals(os.WSTOPSIG(status)).name
                    raise AssertionError(f"stopped by {name}, not ended:\n{self.text()[-2000:]}")
                if pid:
                    self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait_ready(self, *markers: bytes) -> None:
        def ready() -> bool:
            if self.poll() is not None:
                raise AssertionError(f"exited {self.status} before it was ready:\n{self.text()}")
            out = self.raw()
            return all(m in out for m in markers)

        _wait(ready, f"{markers} in the output", READY_LIMIT_S, self.text)

    def wait_exit(self) -> int:
        """The exit status, once the command has ended and its last output has been read."""
        _wait(lambda: self.poll() is not None, "the exit", EXIT_LIMIT_S, self.text)
        self._reader.join(EXIT_LIMIT_S)  # the end of the output: every writer has closed it
        assert self.status is not None
        return self.status

    def after_the_app(self) -> str:
        """What the terminal shows of the output once the app has left its screen: everything
        after the last alternate-screen-off sequence."""
        out = self.raw()
        return out[out.rfind(ALT_SCREEN_OFF) + len(ALT_SCREEN_OFF) :].decode("utf-8", "replace")

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            if self.popen is not None:
                self.popen.wait(EXIT_LIMIT_S)
            else:
                os.waitpid(self.pid, 0)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with start_in_thread(SimConfig(speed=20.0, n_spec=4, seed=1), log_sink=lambda _l: None) as s:
        yield s.url


@pytest.fixture(scope="module")
def fake_vllm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fake_vllm(tmp_path_factory.mktemp("fake-vllm"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    full = dict(os.environ)
    full.pop("NO_COLOR", None)
    for name in ("COLUMNS", "LINES"):
        full.pop(name, None)
    full.update(
        PYTHONPATH=SRC,
        TERM="xterm-256color",
        FAKE_VLLM_MODE="ok",
        XDG_STATE_HOME=str(tmp_path / "state"),  # vLLM logs, web's token file
    )
    return full


def _host(fake: Path) -> list[str]:
    return ["--vllm", str(fake), "--model", "tiny", "--method", "ngram", "--port", "0"]


def _expected(sig: signal.Signals | str) -> int:
    return 130 if sig == CTRL_C else 128 + int(sig)


# ------------------------------------------------------------------ in the app, on a terminal

APPS = ("watch", "demo", "replay", "chat", "chat-host", "serve")
"""Each with the words that show its app is on screen and what it says after it."""
STOPS: list[signal.Signals | str] = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, CTRL_C]


def _app_case(name: str, sim: str, fake: Path) -> tuple[list[str], bytes, str]:
    interrupted, stopped = "interrupted", "vLLM stopped (process group"
    return {
        "watch": (["watch", "--attach", sim, "--interval", "0.3"], b"SIMULATED", interrupted),
        "demo": (["demo", "--speed", "20", "--max-tokens", "64"], b"SIMULATED", interrupted),
        "replay": (["replay", SAMPLE], b"RECORDED", interrupted),
        "chat": (["chat", "--attach", sim], b"SIMULATED", interrupted),
        "chat-host": (["chat", *_host(fake)], b"tiny", stopped),
        "serve": (["serve", *_host(fake)], b"tiny", stopped),
    }[name]


@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s if isinstance(s, str) else s.name)
@pytest.mark.parametrize("name", APPS)
def test_the_app_exits_with_the_documented_status_and_says_so_on_the_shells_screen(
    name: str,
    stop: signal.Signals | str,
    sim_url: str,
    fake_vllm: Path,
    env: dict[str, str],
) -> None:
    args, shown, says = _app_case(name, sim_url, fake_vllm)
    command = Command(args, env, terminal=True)
    try:
        command.wait_ready(ALT_SCREEN_ON, shown)
        if stop == CTRL_C:
            os.write(command.fd, b"\x03")
        else:
            assert isinstance(stop, signal.Signals)
            os.kill(command.pid, stop)
        code = command.wait_exit()
        after = command.after_the_app()
        assert code == _expected(stop), command.text()[-2000:]
        assert says in after, f"{says!r} is not on the shell's screen: {after!r}"
        assert "Traceback" not in command.text()
    finally:
        command.kill()


# ------------------------------------------------------------------ without a terminal

NO_TERMINAL = ("watch", "demo", "replay", "chat", "serve", "bench", "sweep", "sim", "web")


def _plain_case(name: str, sim: str, fake: Path, tmp_path: Path) -> tuple[list[str], bytes]:
    measure = ["--duration", "10m", "--warmups", "0", "--input-len", "16", "--output-len", "64"]
    points = ["--point", f"0={sim}", "--point", f"4={sim}", "--repeats", "1"]
    return {
        "watch": (["watch", "--json", "--attach", sim, "--interval", "0.3"], b'"schema"'),
        "demo": (["demo", "--speed", "20", "--max-tokens", "64"], b"[SIMULATED] specmon demo"),
        "replay": (["replay", SAMPLE], b"] demo-cycle.ndjson.gz"),
        "chat": (["chat", *_host(fake)], ALT_SCREEN_ON),  # its app, after the start-up lines
        "serve": (["serve", *_host(fake)], b"ready: "),
        "bench": (["bench", "--attach", sim, *measure], b"measuring (timed)"),
        "sweep": (
            ["sweep", *points, "--out", str(tmp_path / "sweep"), *measure],
            b"measuring (timed)",
        ),
        "sim": (["sim", "--port", "0", "--speed", "20"], b"Ctrl-C stops it"),
        "web": (["web", "demo", "--port", "0"], b"serving `specmon demo`"),
    }[name]


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("name", NO_TERMINAL)
def test_without_a_terminal_the_command_exits_with_the_documented_status(
    name: str,
    sig: signal.Signals,
    sim_url: str,
    fake_vllm: Path,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    args, marker = _plain_case(name, sim_url, fake_vllm, tmp_path)
    command = Command(args, env, terminal=False)
    try:
        command.wait_ready(marker)
        os.kill(command.pid, sig)
        code = command.wait_exit()
        assert code == (0 if name == "sim" else 128 + int(sig)), command.text()[-2000:]
        assert "Traceback" not in command.text()
    finally:
        command.kill()


# ------------------------------------------------------------------ in the background of a shell


class Shell:
    """An interactive bash on a pseudo-terminal (job control on), read as it writes."""

    def __init__(self, env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = bytearray()

    def pump(self) -> str:
        while select.select([self.fd], [], [], 0)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                break
            if not data:
                break
            self.output += data
        return self.output.decode("utf-8", "replace")

    def run(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def wait_for(self, pattern: str, what: str, limit: float = READY_LIMIT_S) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def seen() -> bool:
            match = re.search(pattern, self.pump())
            if match:
                found.append(match)
            return bool(match)

        _wait(seen, what, limit, self.pump)
        return found[0]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (None: gone or a zombie being reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("name", ["sim", "demo"])
def test_a_command_in_the_background_of_a_shell_ends_on_sigterm(
    name: str, env: dict[str, str], tmp_path: Path
) -> None:
    """`specmon sim --port P > log 2>&1 &`, then `kill %1`: it was left `Stopped (tty output)`
    (state T), and after SIGCONT the watchdog said the clean stop did not finish. It must end,
    with its documented status (sim 0; demo, the plain lines without a terminal, 143)."""
    log = tmp_path / "log"
    port = _free_port()
    args = {"sim": f"sim --port {port}", "demo": "demo --speed 20 --max-tokens 64"}[name]
    shell = Shell(env)
    pid: int | None = None
    try:
        shell.run("PS1='$ '")
        shell.run(f"{sys.executable} -m specmon {args} > {log} 2>&1 & echo PID=$!")
        pid = int(shell.wait_for(r"PID=(\d+)", "the job's pid").group(1))
        if name == "sim":
            _wait(lambda: _answers(port), "the simulator to answer", READY_LIMIT_S, shell.pump)
        else:
            answered = lambda: "[SIMULATED] r" in log.read_text()  # noqa: E731
            _wait(answered, "an answer", READY_LIMIT_S, shell.pump)
        shell.run("kill %1")
        states: list[str] = []

        def gone() -> bool:
            state = _state(pid)
            if state is not None:
                states.append(state)
            return state is None or state == "T"

        _wait(gone, f"{name} to end after SIGTERM", EXIT_LIMIT_S, log.read_text)
        assert "T" not in states, f"stopped in the background:\n{shell.pump()}\n{log.read_text()}"
        shell.run("wait %1; echo EXIT=$?")
        code = int(shell.wait_for(r"EXIT=(\d+)", "the job's status").group(1))
        assert code == (0 if name == "sim" else 143), f"{shell.pump()}\n{log.read_text()}"
        assert "did not finish" not in log.read_text()
    finally:
        if pid is not None and _state(pid) is not None:
            os.kill(pid, signal.SIGKILL)
        shell.close()
