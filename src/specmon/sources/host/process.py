"""The hosted `vllm serve` process: launch, log pump, readiness, failure report, stop.

- Launch: its own session (a new process group, so the whole group can be signalled and a Ctrl-C
  in the terminal reaches specmon only), NO_COLOR=1 among the environment changes, stdin closed,
  stdout and stderr into one pipe.
- Log pump (a thread): every line goes, secrets masked, to the log file (path shown to the user),
  to a bounded tail, to the startup tracker (core.startup_log) and to the line sinks (the cli posts
  them to the hub as ServerLogLine events, so the dashboard and recordings keep them).
- Ready: `/health` answers 200. Failure: the process exits, or is not ready within the timeout;
  `HostStartError` carries the last 50 log lines and the recognised cause.
- Stop: SIGTERM to the API server (vLLM shuts its engine down in order), then SIGTERM to the whole
  group, then SIGKILL after the grace period; returns the pids that survived (none, normally).
- Watchdog: a tiny separate process holds the read end of a pipe whose write end only specmon
  has. When specmon goes away in any way, SIGKILL included, the pipe closes and the watchdog stops
  the group (TERM, then KILL after the grace period), then exits itself.
- Scratch folder: the server's TMPDIR is a folder of its own, removed once its group is gone (by
  `stop`, or by the watchdog). vLLM puts its engine's IPC sockets and its distributed-init file
  there and never removes them: every start used to leave eight entries in /tmp. Torch's compile
  cache, which also defaults to the temporary folder, keeps its usual place (make_scratch) so
  that later starts still find it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import getpass
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from specmon.core.errors import SpecmonError
from specmon.core.events import SessionInfo
from specmon.core.redaction import Scrubber
from specmon.core.startup_log import (
    FailureCause,
    StartupFailed,
    StartupProgress,
    StartupTracker,
    recognise_failure,
)
from specmon.sources.host.spec import HostCommand

LOG_TAIL_LINES = 50
KEEP_LINES = 400
DEFAULT_READY_TIMEOUT_S = 1800.0
"""Large models download and load for many minutes; the cli's --ready-timeout changes it."""
DEFAULT_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL when stopping the group."""
HEALTH_POLL_S = 0.5
LEFT_BEHIND_S = 2.0
"""After the API server exited on SIGTERM, how long the rest of its group may take to follow
before the group itself is signalled."""

LineSink = Callable[[str], None]


class HostStartError(SpecmonError):
    """The hosted server exited or did not become ready. `report()` has the tail and the cause."""

    def __init__(
        self,
        reason: str,
        *,
        tail: list[str],
        cause: FailureCause | None,
        log_path: Path,
        returncode: int | None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tail = tail
        self.cause = cause
        self.log_path = log_path
        self.returncode = returncode

    def failure(self, *, after_ready: bool = False) -> StartupFailed:
        """This error as the app's and stderr's StartupFailed (`after_ready`: it stopped while
        serving)."""
        cause = self.cause
        return StartupFailed(
            reason=self.reason,
            tail=tuple(self.tail),
            log_path=str(self.log_path),
            cause=cause.summary if cause else None,
            hint=cause.hint if cause else None,
            seen_in=cause.line if cause else None,
            after_ready=after_ready,
        )

    def report(self) -> str:
        return self.failure().report()


def default_log_path(port: int, environ: dict[str, str] | None = None) -> Path:
    """${XDG_STATE_HOME:-~/.local/state}/specmon/logs/vllm-<UTC time>-<port>.log"""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return Path(base) / "specmon" / "logs" / f"vllm-{stamp}-{port}.log"


_WATCHDOG = r"""
import os, shutil, signal, sys, time
pgid, grace, scratch = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
try:
    while sys.stdin.buffer.read(4096):
        pass
except Exception:
    pass
def alive():
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
if alive():
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(pgid, sig)
        except OSError:
            break
        end = time.monotonic() + wait
        while time.monotonic() < end and alive():
            time.sleep(0.1)
        if not alive():
            break
if scratch and not alive():
    shutil.rmtree(scratch, ignore_errors=True)
"""
SCRATCH_PREFIX = "specmon-vllm-tmp-"
"""The server's own temporary folder: mkdtemp(prefix=...) in the usual temporary folder."""


def inductor_cache_dir() -> str:
    """Where torch's compile cache lives when TORCHINDUCTOR_CACHE_DIR is not set: in the temporary
    folder of this process, under torchinductor_<user> (torch._inductor's default_cache_dir)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        user = str(os.getuid())
    return os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )


def make_scratch() -> Path:
    """A new temporary folder for one server. Its torchinductor_<user> is a link to torch's usual
    compile cache: torch finds some of its cache (the precompiled headers) under the temporary
    folder whatever TORCHINDUCTOR_CACHE_DIR says, and would otherwise build it again on every
    start. Removing the folder removes the link, never what it points to."""
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    cache = Path(inductor_cache_dir())
    with contextlib.suppress(OSError):  # without the link, torch builds that cache again
        cache.mkdir(parents=True, exist_ok=True)
        (scratch / cache.name).symlink_to(cache, target_is_directory=True)
    return scratch


def scratch_environment(env: dict[str, str], scratch: Path) -> dict[str, str]:
    """`env` with TMPDIR the server's own folder, and torch's compile cache kept where it was."""
    env = dict(env)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor_cache_dir())
    env["TMPDIR"] = str(scratch)
    return env


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) pids whose process group is `pgid` (Linux /proc; else a signal probe)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except OSError:
            return []
        return [pgid]
    members: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


@dataclass(frozen=True)
class StopReport:
    """How a stop went: which signals were needed and which pids survived (none, normally)."""

    signals: tuple[str, ...]
    survivors: tuple[int, ...]


class HostedServer:
    """One `vllm serve` started by specmon. Create with `HostedServer.launch()`."""

    def __init__(
        self,
        command: HostCommand,
        process: subprocess.Popen[bytes],
        log_path: Path,
        log_file: IO[str],
        watchdog: subprocess.Popen[bytes] | None,
        *,
        grace_s: float,
        scratch: Path | None,
    ) -> None:
        self.command = command
        self.base_url = command.base_url
        self.log_path = log_path
        self.process = process
        self.pid = process.pid
        self.pgid = process.pid  # leader of its own session and group
        self.grace_s = grace_s
        self.scratch = scratch
        """The server's TMPDIR, removed once its group is gone."""
        self._log_file = log_file
        self._watchdog = watchdog
        self._scrub = Scrubber.of(command.secrets, environ=command.environment())
        """The server's log lines go through it before they are kept or written: the command's
        secrets and the token values of the environment the server runs with."""
        self._lock = threading.Lock()
        self._tail: deque[str] = deque(maxlen=KEEP_LINES)
        self._sinks: list[LineSink] = []
        self._tracker = StartupTracker()
        self._changed = threading.Event()
        self.lines_seen = 0
        self.session_info: SessionInfo | None = None
        """What a recording's header says about this server (set by whoever planned it)."""
        self._stopped = False
        self._pump = threading.Thread(target=self._read_output, name="vllm-log", daemon=True)
        self._pump.start()

    # ------------------------------------------------------------ launch

    @classmethod
    def launch(
        cls,
        command: HostCommand,
        log_path: Path,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        environ: dict[str, str] | None = None,
        watchdog: bool = True,
    ) -> HostedServer:
        """Start the server (does not wait for it). Raises OSError if it cannot be executed."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = log_path.open("a", encoding="utf-8", errors="replace")
        scratch = make_scratch()
        try:
            process = subprocess.Popen(
                list(command.argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=scratch_environment(command.environment(environ), scratch),
                start_new_session=True,
            )
        except BaseException:
            log_file.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        guard = None
        if watchdog:
            try:
                guard = subprocess.Popen(
                    [sys.executable, "-c", _WATCHDOG, str(process.pid), str(grace_s), str(scratch)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except BaseException:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                log_file.close()
                shutil.rmtree(scratch, ignore_errors=True)
                raise
        return cls(command, process, log_path, log_file, guard, grace_s=grace_s, scratch=scratch)

    # ------------------------------------------------------------ output

    def add_line_sink(self, sink: LineSink, *, replay: bool = False) -> None:
        """Call `sink(line)` (on the log thread) for every later line; with `replay`, first for
        the lines kept so far (atomically: no line is missed or given twice)."""
        with self._lock:
            if replay:
                for line in self._tail:
                    sink(line)
            self._sinks.append(sink)

    def _read_output(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            for raw in iter(stream.readline, b""):
                text = raw.decode("utf-8", errors="replace")
                for piece in text.replace("\r\n", "\n").split("\r"):
                    line = piece.rstrip("\n")
                    if line.strip():
                        self._line(line)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
            with self._lock, contextlib.suppress(OSError, ValueError):
                self._log_file.close()
            self._changed.set()

    def _line(self, raw_line: str) -> None:
        line = self._scrub.text(raw_line)
        with self._lock:
            self.lines_seen += 1
            with contextlib.suppress(OSError, ValueError):
                self._log_file.write(line + "\n")
                self._log_file.flush()
            self._tail.append(line)
            if self._tracker.feed(line):
                self._changed.set()
            for sink in list(self._sinks):
                with contextlib.suppress(Exception):  # a sink never stops the log
                    sink(line)

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        """The lines after the first `seen` ones (only the kept tail when more came) and the
        count of lines so far: a reader passes the count back in to get only new lines."""
        with self._lock:
            total = self.lines_seen
            new = max(0, min(total - seen, len(self._tail)))
            return total, list(self._tail)[len(self._tail) - new :] if new else []

    def tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        with self._lock:
            return list(self._tail)[-lines:]

    @property
    def progress(self) -> StartupProgress:
        with self._lock:
            return self._tracker.progress

    # ------------------------------------------------------------ readiness

    def poll(self) -> int | None:
        """The exit code, or None while the API server runs."""
        return self.process.poll()

    def failure(self, reason: str) -> HostStartError:
        """A HostStartError with the last 50 lines and the recognised cause (after the log has
        been read to its end when the process is gone)."""
        if self.process.poll() is not None:
            self._pump.join(timeout=5.0)
        with self._lock:
            lines = list(self._tail)
        return HostStartError(
            reason,
            tail=lines[-LOG_TAIL_LINES:],
            cause=recognise_failure(lines),
            log_path=self.log_path,
            returncode=self.process.poll(),
        )

    def wait_ready(
        self,
        timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        *,
        on_progress: Callable[[StartupProgress], None] | None = None,
        cancel: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> StartupProgress:
        """Poll /health until it answers 200 (ready); raise HostStartError when the server exits
        first or `timeout_s` passes. `on_progress` gets each new StartupProgress."""
        deadline = clock() + timeout_s
        last: StartupProgress | None = None
        url = f"{self.base_url}/health"
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                progress = self.progress
                if on_progress is not None and progress != last:
                    on_progress(progress)
                last = progress
                code = self.process.poll()
                if code is not None:
                    raise self.failure(f"the server exited with code {code} before it was ready")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        with self._lock:
                            ready = self._tracker.mark_ready()
                        if on_progress is not None:
                            on_progress(ready)
                        return ready
                if clock() > deadline:
                    raise self.failure(f"not ready (/health 200) after {timeout_s:g} s")
                if cancel is not None and cancel.is_set():
                    raise self.failure("startup cancelled")
                self._changed.wait(HEALTH_POLL_S)
                self._changed.clear()

    # ------------------------------------------------------------ stop

    def members(self) -> list[int]:
        return group_members(self.pgid)

    def _wait_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.1)
            if not self.members():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def stop(self, grace_s: float | None = None) -> StopReport:
        """Stop the whole group: TERM the API server, TERM the group, KILL after the grace
        period. Idempotent. Returns the signals needed and any survivors."""
        grace = self.grace_s if grace_s is None else grace_s
        sent: list[str] = []
        if not self._stopped:
            self._stopped = True
            leader_alive = self.process.poll() is None
            if leader_alive:
                with contextlib.suppress(ProcessLookupError):
                    self.process.send_signal(signal.SIGTERM)
                    sent.append("TERM")
            if leader_alive:  # vLLM's API server shuts its engine down in order, then exits
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=grace)
            # What an exited API server left behind gets a moment to follow it, not the whole
            # grace period; a dead one shuts nothing down any more: its group is signalled.
            if not self._wait_gone(min(grace, LEFT_BEHIND_S) if leader_alive else 0.0):
                for sig, wait_s in ((signal.SIGTERM, min(grace, 5.0)), (signal.SIGKILL, grace)):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.pgid, sig)
                        sent.append("group " + sig.name.removeprefix("SIG"))
                    if self._wait_gone(wait_s):
                        break
        self._pump.join(timeout=5.0)
        self._release_watchdog()
        survivors = tuple(self.members())
        if self.scratch is not None and not survivors:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return StopReport(tuple(sent), survivors)

    def _release_watchdog(self) -> None:
        guard = self._watchdog
        if guard is None:
            return
        self._watchdog = None
        with contextlib.suppress(OSError, ValueError):
            if guard.stdin is not None:
                guard.stdin.close()  # EOF: it finds the group gone and exits
        try:
            guard.wait(timeout=self.grace_s * 2 + 5.0)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()
