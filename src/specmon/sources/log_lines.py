"""Server log lines as a source: lines pushed from any thread become `ServerLogLine` events.

A server that specmon runs itself (the demo's simulator, later a hosted vLLM) writes its log
through a sink callable, on its own thread. `LogLineSource.push` is that sink: it timestamps the
line with the session clock at once and queues it; `run(emit)`, a source on the hub's loop,
emits the queued lines in order. Lines pushed before the source runs are kept (the newest
`max_pending`) and emitted when it starts; lines pushed after it ended are dropped.
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
