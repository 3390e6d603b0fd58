"""Start `specmon web` as a real process for the tests, find the app processes it starts, and
check that none is left after it stops. Process groups are read from /proc here, independently
of specmon's own helper."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

WAIT_LIMIT_S = 90.0
"""Upper bound on waiting for something to appear: a failure bound, not a speed target."""


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid, pgrp = text[text.rfind(")") + 2 :].split()[:3]
    return state, int(ppid), int(pgrp)


def live_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def children(pid: int) -> list[int]:
    found = []
    for child in live_pids():
        stat = _stat(child)
        if stat is not None and stat[1] == pid and stat[0] != "Z":
            found.append(child)
    return found


def group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group."""
    found = []
    for pid in live_pids():
        stat = _stat(pid)
        if stat is not None and stat[2] == pgid and stat[0] != "Z":
            found.append(pid)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class WebRun:
    """A `specmon web` process (in a process group of its own) and its output lines."""

    proc: subprocess.Popen[str]
    url: str
    """The server's address, without the token."""
    lines: list[str] = field(default_factory=list)
    token: str | None = None

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"

    @property
    def open_url(self) -> str:
        """The address as printed: with the token (what the user opens)."""
        return self.url if self.token is None else f"{self.url}/?token={self.token}"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def headers(self) -> dict[str, str]:
        """The cookie a browser holds after opening `open_url`."""
        if self.token is None:
            return {}
        return {"Cookie": f"specmon-web-{self.port}={self.token}"}

    seen_apps: set[int] = field(default_factory=set)
    reader: threading.Thread | None = None
    """The thread reading its output into `lines` (ends at the output's end)."""

    def output(self) -> str:
        """Everything it wrote (stdout and stderr): all of it once it has exited."""
        if self.proc.poll() is not None and self.reader is not None:
            self.reader.join(timeout=WAIT_LIMIT_S)
        return "".join(self.lines)

    def apps(self) -> list[int]:
        """The app processes serving pages right now (the server's children)."""
        found = children(self.proc.pid)
        self.seen_apps.update(found)
        return found

    def stop(self, signum: int = signal.SIGINT) -> int:
        """Signal the server and return its exit status. Its apps are left as they are, for
        the test to check; `kill` cleans up after."""
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=WAIT_LIMIT_S)

    def kill(self) -> None:
        """Clean-up after a failed test: the server's group, and every app group it started."""
        for pid in {*self.apps(), *self.seen_apps}:  # also those a dead server left behind
            if group_alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=WAIT_LIMIT_S)


_RUNTIME_DIR: list[str] = []


def runtime_dir() -> str:
    """A private directory (0700) for the servers' token files: $XDG_RUNTIME_DIR of the servers
    the tests start, so a server killed without its clean stop leaves nothing in the home."""
    if not _RUNTIME_DIR:
        import atexit
        import shutil
        import tempfile

        made = tempfile.mkdtemp(prefix="specmon-web-run-")
        atexit.register(shutil.rmtree, made, True)
        _RUNTIME_DIR.append(made)
    return _RUNTIME_DIR[0]


def env(changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This checkout's sources first on the path (the app processes inherit it), with
    `changes` made (None: the variable removed)."""
    path = os.environ.get("PYTHONPATH", "")
    made = {
        **os.environ,
        "PYTHONPATH": SRC + (os.pathsep + path if path else ""),
        "XDG_RUNTIME_DIR": runtime_dir(),
    }
    for name, value in (changes or {}).items():
        if value is None:
            made.pop(name, None)
        else:
            made[name] = value
    return made


def run_web(
    *args: str, timeout: float = 60.0, environ: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`specmon web ARGS` to its end (for the commands that fail at once), with `environ`'s
    changes to its environment."""
    return subprocess.run(
        [sys.executable, "-m", "specmon", "web", *args],
        capture_output=True,
        text=True,
        env=env(environ),
        timeout=timeout,
    )


def start_web(
    *args: str, environ: Mapping[str, str | None] | None = None, nofile: int | None = None
) -> WebRun:
    """`specmon web ARGS --port 0`, once it prints the address it serves; with `environ`'s
    changes to its environment, and `nofile` its soft limit on open files."""

    def limit_files() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

    proc = subprocess.Popen(
        [sys.executable, "-m", "specmon", "web", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env(environ),
        start_new_session=True,
        preexec_fn=None if nofile is None else limit_files,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        found = re.search(r" at (http://[^\s/]+)(/\?token=(\S+))? ", line)
        if found:
            return WebRun(proc, found.group(1), seen, token=found.group(3), reader=reader)
    proc.kill()
    proc.wait()
    raise AssertionError("specmon web did not say where it serves:\n" + "".join(seen))
