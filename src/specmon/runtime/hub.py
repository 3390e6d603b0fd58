"""The hub: one asyncio loop in a background thread that runs sources and fans their events out.

Sources (stream client, /metrics scraper, GPU sampler, recording player) run as tasks on the hub's
own loop, so rendering can never delay an arrival timestamp. Every event goes, in arrival order,
to each subscriber (session state, recorder, ...), called on the hub thread under the hub's lock.
The UI never gets a call per token: it reads the state at its own frame rate through `read()`,
which holds the same lock only for the time of one read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from specmon.core.clock import Clock
from specmon.core.events import Emit, Event

Subscriber = Callable[[Event], None]
SourceRun = Callable[[Emit], Awaitable[Any]]
T = TypeVar("T")

log = logging.getLogger(__name__)


class SessionClock:
    """Seconds since the session started, on the monotonic clock (recordings store this `t`)."""

    def __init__(self, base: Clock = time.monotonic) -> None:
        self._base = base
        self._start = base()

    def __call__(self) -> float:
        return self._base() - self._start


class Hub:
    """Runs sources on a private event loop in a daemon thread and fans events out to subscribers.

    Use as a context manager, or call `start()` and `stop()`. `stop()` cancels every task, runs the
    registered closers (HTTP clients, files) on the loop, stops the loop and joins the thread.
    """

    def __init__(self, *, clock: Clock | None = None, name: str = "specmon-hub") -> None:
        self.clock: Clock = clock if clock is not None else SessionClock()
        self._name = name
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closers: list[Callable[[], Awaitable[None] | None]] = []
        self._ready = threading.Event()
        self.errors: deque[str] = deque(maxlen=100)
        """Recent errors raised by subscribers or sources (they never stop the hub)."""
        self.event_count = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Hub:
        """Start the loop thread (idempotent); returns self."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run_loop, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        return self

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            # Join the default executor's threads (asyncio.to_thread, DNS look-ups): close()
            # alone leaves them winding down after stop() returns.
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel all tasks, run closers, stop the loop and join its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(timeout)
            except (concurrent.futures.TimeoutError, Exception) as exc:
                self.errors.append(f"shutdown: {type(exc).__name__}: {exc}")
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
        self._thread = None
        self._loop = None

    async def _shutdown(self) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for closer in reversed(self._closers):
            try:
                result = closer()
                if result is not None:
                    await result
            except Exception as exc:
                self.errors.append(f"closing: {type(exc).__name__}: {exc}")
        self._closers.clear()

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ events

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; it receives every later event, on the hub thread, in arrival order."""
        with self._lock:
            self._subscribers.append(subscriber)

    def emit(self, event: Event) -> None:
        """Hand one event to every subscriber in order. A failing subscriber is noted, not fatal."""
        with self._lock:
            self.event_count += 1
            for subscriber in self._subscribers:
                try:
                    subscriber(event)
                except Exception as exc:
                    self.errors.append(f"{_name_of(subscriber)}: {type(exc).__name__}: {exc}")

    def post(self, event: Event) -> None:
        """Thread-safe emit (e.g. a marker from the UI thread): queued onto the hub loop."""
        self._require_loop().call_soon_threadsafe(self.emit, event)

    def read(self, reader: Callable[[], T]) -> T:
        """Run `reader` (e.g. `state.snapshot`) under the hub's lock, from any thread."""
        with self._lock:
            return reader()

    # ------------------------------------------------------------ tasks

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the hub is not started")
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run a coroutine on the hub loop (thread-safe); it is cancelled on stop()."""
        loop = self._require_loop()

        async def tracked() -> T:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                return await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.errors.append(f"task: {type(exc).__name__}: {exc}")
                raise
            finally:
                self._tasks.discard(task)

        return asyncio.run_coroutine_threadsafe(tracked(), loop)

    def run_source(self, run: SourceRun) -> concurrent.futures.Future[Any]:
        """Start a source: `run(emit)` is awaited on the hub loop until it ends or is cancelled."""
        return self.submit(_as_coroutine(run(self.emit)))

    def every(self, interval: float, action: Callable[[], None]) -> concurrent.futures.Future[None]:
        """Call `action` on the hub thread every `interval` seconds (e.g. recorder flushes)."""

        async def loop_forever() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    with self._lock:
                        action()
                except Exception as exc:
                    self.errors.append(f"{_name_of(action)}: {type(exc).__name__}: {exc}")

        return self.submit(loop_forever())

    def add_closer(self, closer: Callable[[], Awaitable[None] | None]) -> None:
        """Register a cleanup (sync or async) run on the hub loop at stop(), newest first."""
        self._closers.append(closer)


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _name_of(obj: object) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__
