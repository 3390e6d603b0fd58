"""The hub: one asyncio loop in a background thread that runs sources and fans their events out.

Sources (stream client, /metrics scraper, GPU sampler, recording player) run as tasks on the hub's
own loop, so rendering can never delay an arrival timestamp. Every event goes, in arrival order,
to each subscriber (session state, recorder, ...), called on the hub thread under the hub's lock.
The UI never gets a call per token: it reads the state at its own frame rate through `read()`,
which holds the same lock only for the time of one read.

Stopping is bounded (`STOP_TIMEOUT_S`): tasks are cancelled, closers run, the loop stops and the
thread is joined, each within what is left of the bound; whatever does not finish is abandoned.
Blocking calls made from the loop (`asyncio.to_thread`: GPU samples; DNS look-ups) run on daemon
threads of the hub's own executor, never on a thread the interpreter would join at exit, so a
stuck NVML call or look-up cannot keep the process alive.
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

STOP_TIMEOUT_S = 1.0
"""Bound on `Hub.stop()`: a clean stop takes milliseconds; past this, what is left is abandoned."""

log = logging.getLogger(__name__)


class SessionClock:
    """Seconds since the session started, on the monotonic clock (recordings store this `t`)."""

    def __init__(self, base: Clock = time.monotonic) -> None:
        self._base = base
        self._start = base()

    def __call__(self) -> float:
        return self._base() - self._start


class DaemonExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each call on a fresh daemon thread (the hub loop's default executor).

    A ThreadPoolExecutor only by type (asyncio's `set_default_executor` insists on one): none of
    its pool is used. Unlike the pool's workers, which the interpreter joins at exit, nothing
    here can keep the process alive; `shutdown(wait=True)` waits at most `join_timeout` seconds
    in all. The calls are few (a GPU sample a second, a DNS look-up per new connection), so a
    thread per call costs nothing that matters.
    """

    def __init__(self, name: str = "specmon-worker", join_timeout: float = 0.5) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)  # starts no thread
        self._name = name
        self._join_timeout = join_timeout
        self._daemons: set[threading.Thread] = set()
        self._daemons_lock = threading.Lock()
        self._closed = False

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def work() -> None:
            try:
                if not future.set_running_or_notify_cancel():
                    return
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            finally:
                with self._daemons_lock:
                    self._daemons.discard(threading.current_thread())

        thread = threading.Thread(target=work, name=self._name, daemon=True)
        with self._daemons_lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._daemons.add(thread)
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._daemons_lock:
            self._closed = True
            threads = list(self._daemons)
        if not wait:
            return
        deadline = time.monotonic() + self._join_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class Hub:
    """Runs sources on a private event loop in a daemon thread and fans events out to subscribers.

    Use as a context manager, or call `start()` and `stop()`. `stop()` cancels every task, runs the
    registered closers (HTTP clients, files) on the loop, stops the loop and joins the thread.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        name: str = "specmon-hub",
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SessionClock()
        self._stop_timeout = stop_timeout
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

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Hub:
        """Start the loop thread (idempotent); returns self."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run_loop, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._loop is None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("the hub's event loop could not start")
        return self

    def _run_loop(self) -> None:
        try:
            loop = asyncio.new_event_loop()
            executor = DaemonExecutor(f"{self._name}-worker")
            loop.set_default_executor(executor)
            asyncio.set_event_loop(loop)
            self._loop = loop
        finally:
            self._ready.set()  # start() must never wait for a thread that failed
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(
                    asyncio.wait_for(loop.shutdown_asyncgens(), self._stop_timeout / 2)
                )
            # Join the worker threads (asyncio.to_thread, DNS look-ups) for a bounded time: a
            # finished call's thread is gone when stop() returns; a stuck one is a daemon.
            executor.shutdown(wait=True)
            with contextlib.suppress(Exception):
                loop.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """Cancel all tasks, run closers, stop the loop and join its thread, within `timeout`
        seconds in all (default STOP_TIMEOUT_S); what has not finished by then is abandoned (the
        loop thread is a daemon) and noted in `errors`."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        bound = self._stop_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        if thread.is_alive():
            try:
                fut = asyncio.run_coroutine_threadsafe(self._shutdown(bound), loop)
                fut.result(max(0.0, deadline - time.monotonic()))
            except (concurrent.futures.TimeoutError, Exception) as exc:
                self.errors.append(f"shutdown: {type(exc).__name__}: {exc}")
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                loop.call_soon_threadsafe(loop.stop)
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.errors.append(f"shutdown: the hub thread did not end within {bound:g} s")
        self._thread = None
        self._loop = None

    async def _shutdown(self, bound: float) -> None:
        deadline = time.monotonic() + bound
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
        for closer in reversed(self._closers):
            try:
                result = closer()
                if result is not None:
                    await asyncio.wait_for(
                        _as_coroutine(result), max(0.0, deadline - time.monotonic())
                    )
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
