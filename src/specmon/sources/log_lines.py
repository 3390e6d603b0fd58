"""Server log lines as a source: lines pushed from any thread become `ServerLogLine` events.

A server that specmon runs itself (the demo's simulator, later a hosted vLLM) writes its log
through a sink callable, on its own thread. `LogLineSource.push` is that sink: it timestamps the
line with the session clock at once and queues it; `run(emit)`, a source on the hub's loop,
emits the queued lines in order. Lines pushed before the source runs are kept (the newest
`max_pending`) and emitted when it starts; lines pushed after it ended are dropped.

`KeptLog` is the other reader of such a sink: it keeps the newest lines for the app's log pane
(l / ctrl+l), as a hosted vLLM's log is kept (the demo's app shows its simulator's log so).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import Emit, ServerLogLine


class LogLineSource:
    """Queues log lines from any thread and emits them on the hub loop as ServerLogLine."""

    def __init__(
        self, source: str = "", *, clock: Clock = monotonic_clock, max_pending: int = 1000
    ) -> None:
        self.source = source
        """The server the lines come from (its base URL); may be set once the server runs."""
        self._clock = clock
        self._pending: deque[tuple[float, str]] = deque(maxlen=max_pending)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._ended = False

    def push(self, line: str) -> None:
        """Queue one line (thread-safe, never blocks, never raises)."""
        t = self._clock()
        with self._lock:
            if self._ended:
                return
            self._pending.append((t, line))
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    def __call__(self, line: str) -> None:
        self.push(line)

    async def run(self, emit: Emit) -> None:
        """Emit queued lines as they come, until cancelled."""
        wake = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._wake = wake
        try:
            while True:
                with self._lock:
                    lines = list(self._pending)
                    self._pending.clear()
                for t, line in lines:
                    emit(ServerLogLine(t=t, source=self.source, line=line))
                await wake.wait()
                wake.clear()
        finally:
            with self._lock:
                self._ended = True
                self._loop = None
                self._wake = None


KEPT_LOG_LINES = 1000
"""The most lines a `KeptLog` keeps (older ones are dropped)."""


class KeptLog:
    """The newest lines of a server's log kept in memory, pushed from any thread (a sink, like
    `LogLineSource.push`) and read by the app's log pane (l / ctrl+l) as a hosted vLLM's are:
    `lines_after(seen)` gives the count so far and the lines after the first `seen`. For a server
    that specmon runs in process and whose log has no file (the demo's simulator)."""

    def __init__(self, where: str, *, max_lines: int = KEPT_LOG_LINES) -> None:
        self.where = where
        """What the pane's heading says of where the log is (it has no file)."""
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._count = 0
        self._lock = threading.Lock()

    @property
    def log_path(self) -> str:
        return self.where

    def push(self, line: str) -> None:
        """Keep one line (thread-safe, never blocks on a reader, never raises)."""
        with self._lock:
            self._count += 1
            self._lines.append(line)

    def __call__(self, line: str) -> None:
        self.push(line)

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        """(count of lines so far, the lines after the first `seen`: only those still kept)."""
        with self._lock:
            total = self._count
            new = max(0, min(total - seen, len(self._lines)))
            return total, list(self._lines)[len(self._lines) - new :] if new else []
