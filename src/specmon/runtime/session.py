"""A live monitoring session behind one small API, with the collector in this process or in its own.

`LiveSession` is what the commands and the Textual app use:

    session = CollectorProcess(config, state_factory)   # or InProcessSession(config, ...)
    info = session.start()
    rid = session.submit_chat(ChatRequest("Hi"))        # streams on the collector
    session.snapshot()                                  # the folded state, from any thread
    session.cancel(rid); session.mark("slow here"); session.stop()

The collector is the hub with its sources (stream clients, /metrics scrapers, GPU sampler) and
the recorder. Either way events are folded into the session state by the same `apply`, in
arrival order, and each keeps the timestamp the collector gave it on arrival:

- `InProcessSession`: the hub thread of this process (the Monitor). Rendering in this process
  delays its arrival timestamps through the GIL (docs/benchmarks.md, "Arrival skew").
- `CollectorProcess`: the hub runs in a child process (multiprocessing, spawn) that has nothing
  else to do; it sends events in batches (every 20 ms, pickled) over a pipe, and this process
  folds them on a receiver thread. Commands go the other way. The child dies with its parent
  (PR_SET_PDEATHSIG on Linux, and the pipe's end-of-file everywhere), ignores Ctrl-C (its
  parent stops it: a terminal's SIGINT reaches the whole process group), and stops within the
  same bound as the hub; `stop()` ends it by force past that.

Replay is not a session: a recording player is a source of the same events, folded the same way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol

from specmon.core.events import Event, Marker, RequestEnded, SessionInfo
from specmon.runtime.hub import STOP_TIMEOUT_S, Hub, Subscriber
from specmon.runtime.monitor import Monitor, State, StateFactory, Target
from specmon.runtime.prompt_loop import run_request
from specmon.sources.gpu import make_sampler
from specmon.sources.stream_client import ChatRequest, new_request_id

BATCH_INTERVAL_S = 0.02
"""How often the collector process sends the events it gathered (at most 50 batches a second)."""

START_TIMEOUT_S = 90.0
"""Bound on the collector's start: spawning, imports, identifying the servers."""


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What a session attaches to (picklable: it is sent to the collector process)."""

    targets: tuple[Target, ...]
    api_key: str | None = None
    gpu: str = "none"
    """"local" (NVML), "none", or a dcgm-exporter URL (sources.gpu.make_sampler)."""
    interval: float = 1.0
    record: str | None = None
    absolute_clock: bool = False
    """Timestamps on time.monotonic() instead of seconds since the start (for benchmarks)."""
    extra: dict[str, Any] = field(default_factory=dict)


class LiveSession(Protocol):
    """The session API the UI and the commands use (see the module docstring)."""

    def start(self) -> SessionInfo: ...

    def snapshot(self) -> dict[str, Any]: ...

    def subscribe(self, subscriber: Subscriber) -> None: ...

    def read(self, reader: Callable[[], Any]) -> Any: ...

    def submit_chat(self, request: ChatRequest, *, server: int = 0) -> str: ...

    def cancel(self, request_id: str) -> None: ...

    def mark(self, label: str) -> None: ...

    def stop(self) -> None: ...


# --------------------------------------------------------------------------- in this process


class InProcessSession:
    """The collector on a hub thread of this process (`Monitor`)."""

    def __init__(self, config: SessionConfig, state_factory: StateFactory) -> None:
        hub = Hub(clock=time.monotonic) if config.absolute_clock else None
        self.monitor = Monitor(
            config.targets,
            state_factory,
            api_key=config.api_key,
            gpu=make_sampler(config.gpu),
            interval=config.interval,
            record=config.record,
            hub=hub,
        )
        self._running: dict[str, Any] = {}

    def start(self) -> SessionInfo:
        return self.monitor.start()

    def snapshot(self) -> dict[str, Any]:
        return self.monitor.snapshot()

    def subscribe(self, subscriber: Subscriber) -> None:
        self.monitor.hub.subscribe(subscriber)

    def read(self, reader: Callable[[], Any]) -> Any:
        return self.monitor.hub.read(reader)

    def submit_chat(self, request: ChatRequest, *, server: int = 0) -> str:
        rid = new_request_id()
        m = self.monitor
        future = m.hub.submit(
            run_request(
                m.clients[server], request, m.hub.emit, scraper=m.scrapers[server], request_id=rid
            )
        )
        self._running[rid] = future
        future.add_done_callback(lambda _f: self._running.pop(rid, None))
        return rid

    def cancel(self, request_id: str) -> None:
        future = self._running.get(request_id)
        if future is not None:
            future.cancel()

    def mark(self, label: str) -> None:
        hub = self.monitor.hub
        hub.post(Marker(t=hub.clock(), label=label))

    def stop(self) -> None:
        self.monitor.stop()


# --------------------------------------------------------------------------- in its own process


class CollectorProcess:
    """The collector in a child process; events come back in batches and are folded here."""

    def __init__(self, config: SessionConfig, state_factory: StateFactory) -> None:
        self.config = config
        self._state_factory = state_factory
        self.state: State | None = None
        self.info: SessionInfo | None = None
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._receiver: threading.Thread | None = None
        self._started = threading.Event()
        self._stopped = threading.Event()
        self._error: str | None = None
        self.errors: list[str] = []
        self.event_count = 0

    def start(self) -> SessionInfo:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        self._conn = parent
        self._process = ctx.Process(
            target=collector_main,
            args=(self.config, child, os.getpid()),
            name="specmon-collector",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._receiver = threading.Thread(
            target=self._receive, name="specmon-session-receiver", daemon=True
        )
        self._receiver.start()
        if not self._started.wait(START_TIMEOUT_S) or self.info is None:
            self.stop()
            raise RuntimeError(self._error or "the collector process did not start")
        return self.info

    @property
    def pid(self) -> int | None:
        """The collector process's pid (None before start and after stop)."""
        return self._process.pid if self._process is not None else None

    def _receive(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while True:
                kind, payload = conn.recv()
                if kind == "events":
                    self._fold(payload)
                elif kind == "hello":
                    info: SessionInfo = payload
                    with self._lock:
                        self.info = info
                        self.state = self._state_factory(info)
                    self._started.set()
                elif kind == "error":
                    self._error = str(payload)
                    self._started.set()
                elif kind == "stopped":
                    self.errors.extend(payload)
                    break
        except (EOFError, OSError):
            pass
        finally:
            self._stopped.set()
            self._started.set()

    def _fold(self, events: Sequence[Event]) -> None:
        with self._lock:
            state = self.state
            for event in events:
                self.event_count += 1
                if state is not None:
                    try:
                        state.apply(event)
                    except Exception as exc:
                        self.errors.append(f"state: {type(exc).__name__}: {exc}")
                for subscriber in self._subscribers:
                    try:
                        subscriber(event)
                    except Exception as exc:
                        self.errors.append(f"subscriber: {type(exc).__name__}: {exc}")

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._conn is None or self._stopped.is_set():
            raise RuntimeError("the session is not running")
        self._conn.send(message)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            if self.state is None:
                raise RuntimeError("the session is not started")
            return self.state.snapshot()

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def read(self, reader: Callable[[], Any]) -> Any:
        with self._lock:
            return reader()

    def submit_chat(self, request: ChatRequest, *, server: int = 0) -> str:
        rid = new_request_id()
        self._send(("chat", rid, request, server))
        return rid

    def cancel(self, request_id: str) -> None:
        self._send(("cancel", request_id))

    def mark(self, label: str) -> None:
        self._send(("mark", label))

    def stop(self, timeout: float = STOP_TIMEOUT_S + 0.5) -> None:
        """Ask the collector to stop (it closes the recording), wait `timeout` at most, then end
        it by force. Safe to call twice."""
        process, conn = self._process, self._conn
        if process is None or conn is None:
            return
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError, ValueError):
            if not self._stopped.is_set():
                conn.send(("stop",))
        self._stopped.wait(max(0.0, deadline - time.monotonic()))
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            self.errors.append("the collector did not stop in time: terminated")
            process.terminate()
            process.join(0.5)
            if process.is_alive():
                process.kill()
                process.join(0.5)
        with contextlib.suppress(OSError):
            conn.close()
        self._process = None


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux); the pipe's EOF covers the rest."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def collector_main(config: SessionConfig, conn: Connection, parent_pid: int) -> None:
    """The collector process: hub + sources + recorder; events to `conn` in batches."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    outbox: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> bool:
        try:
            with send_lock:
                conn.send(message)
            return True
        except (OSError, ValueError):
            return False

    def sender() -> None:  # the hub thread never waits on the pipe
        while True:
            first = outbox.get()
            batch: list[Event] = []
            if first is not None:
                batch.append(first)
                time.sleep(BATCH_INTERVAL_S)
            done = first is None
            while True:
                try:
                    item = outbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    done = True
                else:
                    batch.append(item)
            if batch and not send(("events", batch)):
                return
            if done:
                return

    hub = Hub(clock=time.monotonic) if config.absolute_clock else Hub()
    monitor = Monitor(
        config.targets,
        None,  # no state here: the parent process folds the events
        api_key=config.api_key,
        gpu=make_sampler(config.gpu),
        interval=config.interval,
        record=config.record,
        hub=hub,
    )
    sending = threading.Thread(target=sender, name="specmon-collector-sender", daemon=True)
    sending.start()
    hub.subscribe(outbox.put)
    try:
        info = monitor.start()
    except Exception as exc:
        send(("error", f"{type(exc).__name__}: {exc}"))
        monitor.stop()
        return
    send(("hello", info))
    running: dict[str, concurrent.futures.Future[RequestEnded]] = {}

    def forget(rid: str) -> Callable[[object], None]:
        def drop(_future: object) -> None:
            running.pop(rid, None)

        return drop

    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break  # the parent is gone
            kind = message[0]
            if kind == "stop":
                break
            if kind == "chat":
                _, rid, request, server = message
                future = hub.submit(
                    run_request(
                        monitor.clients[server],
                        request,
                        hub.emit,
                        scraper=monitor.scrapers[server],
                        request_id=rid,
                    )
                )
                running[rid] = future
                future.add_done_callback(forget(rid))
            elif kind == "cancel":
                found = running.get(message[1])
                if found is not None:
                    found.cancel()
            elif kind == "mark":
                hub.post(Marker(t=hub.clock(), label=str(message[1])))
    finally:
        monitor.stop()
        outbox.put(None)
        sending.join(STOP_TIMEOUT_S)
        send(("stopped", list(hub.errors)))
        with contextlib.suppress(OSError):
            conn.close()
        # Stopped cleanly (recording closed): skip the interpreter's teardown, which takes
        # longer than everything before it.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(0)
