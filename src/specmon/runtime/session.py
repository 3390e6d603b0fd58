"""A live monitoring session behind one small API, its collector in a process of its own.

`LiveSession` is what the commands and the Textual app use:

    session = open_session(config)                      # a CollectorProcess
    info = session.start()
    rid = session.submit_chat(ChatRequest("Hi"))        # streams on the collector
    session.snapshot()                                  # the folded state, from any thread
    session.view()                                      # the published SessionView, no lock
    session.start_recording("s.ndjson"); session.stop_recording()
    session.cancel(rid); session.mark("slow here"); session.stop()
    session.add_target(Target("http://other:8000"))     # watch one more server (blocking)
    session.remove_target("http://other:8000")          # and stop watching it

The collector is the hub with its sources (stream clients, /metrics scrapers, GPU sampler) and
the recorder. Its events are folded into the session state by the same `apply` as everywhere,
in arrival order, and each keeps the timestamp the collector gave it on arrival.

`CollectorProcess`: the hub runs in a child process (multiprocessing, spawn) that has nothing
else to do, so that rendering here cannot delay its arrival timestamps through the GIL
(docs/benchmarks.md, "Arrival skew"); it sends events in batches (every 20 ms, pickled) over a
pipe, and this process folds them on a receiver thread. Commands go the other way. Both
directions are typed, frozen messages (runtime/collector_messages.py), each side dispatching its
set exhaustively. The child dies with its parent (the pipe's end-of-file, and a thread
watching the parent's pid), ignores Ctrl-C (its parent stops it: a terminal's SIGINT reaches the
whole process group), and stops within the same bound as the hub; `stop()` ends it by force past
that. Commands without a live screen (`watch --json`, the plain console of demo and serve) run a
`runtime.monitor.Monitor` on a hub thread of their own process instead.

Replay is not a session: a recording player is a source of the same events, folded the same way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol, assert_never

from specmon.core.events import Event, Marker, RequestEnded, ServerLogLine, SessionInfo
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.core.views import SessionView
from specmon.runtime.baseline import state_factory
from specmon.runtime.canary import start_canaries
from specmon.runtime.collector_messages import (
    AddTarget,
    Call,
    Cancel,
    Chat,
    Command,
    EventBatch,
    Hello,
    LogLine,
    Mark,
    RemoveTarget,
    Reply,
    Report,
    ServerSeen,
    StartFailed,
    StartRecording,
    Stop,
    Stopped,
    StopRecording,
    is_command,
    is_report,
    unknown,
)
from specmon.runtime.fleet_run import FleetSpec, start_fleet
from specmon.runtime.hub import STOP_TIMEOUT_S, Hub, Subscriber
from specmon.runtime.monitor import Monitor, State, StateFactory, Target
from specmon.runtime.prompt_loop import run_request
from specmon.runtime.recorder import Recorder
from specmon.sources.gpu import make_sampler
from specmon.sources.server_identity import ServerIdentity
from specmon.sources.stream_client import ChatRequest, new_request_id

BATCH_INTERVAL_S = 0.02
"""How often the collector process sends the events it gathered (at most 50 batches a second)."""

START_TIMEOUT_S = 90.0
"""Bound on the collector's start: spawning, imports, identifying the servers."""

CALL_TIMEOUT_S = 10.0
"""Bound on a command that answers (start or stop a recording)."""

WARM_UP_AFTER_S = 1.0
"""The collector imports the chat client's SDK once its first events went out, or this long
after saying hello, whichever comes first (importing it before the hello made every start, and
the time to `up`, ~0.9 s longer)."""

PUBLISH_INTERVAL_S = 0.05
"""The receiver thread publishes the folded state's view at most this often (20 Hz), and once
more when the events pause, so the last change is never left unpublished."""


class RecordingSwitch:
    """The session's recording, started and stopped while it runs (the `r` key).

    A hub subscriber: events go to the recording started here, if any. `stop()` also closes the
    recording the monitor opened for `--record`. Call start/stop/flush/close on the hub thread.
    """

    def __init__(self, monitor: Monitor, secrets: tuple[str, ...]) -> None:
        self._monitor = monitor
        self._secrets = secrets
        self._recorder: Recorder | None = None

    def __call__(self, event: Event) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.write(event)

    @property
    def path(self) -> str | None:
        """Where the session is being recorded now (None: not recording)."""
        for recorder in (self._recorder, self._monitor.recorder):
            if recorder is not None and not recorder.closed:
                return str(recorder.path)
        return None

    def start(self, path: str) -> str:
        """Start recording to `path` (a new file); returns it. Raises RecordingError (the file
        exists, cannot be written) or RuntimeError (already recording)."""
        current = self.path
        if current is not None:
            raise RuntimeError(f"already recording to {current}")
        info = self._monitor.info or SessionInfo()
        self._recorder = Recorder(
            path,
            info,
            secrets=self._secrets,
            redact=self._monitor.redact,
            urls=self._monitor.urls,
            baseline=self._monitor.recorded_baseline(),
        )
        return str(self._recorder.path)

    def stop(self) -> str | None:
        """Close the recording (flushed, fsynced); returns its path, None when none was open."""
        path = self.path
        for recorder in (self._recorder, self._monitor.recorder):
            if recorder is not None and not recorder.closed:
                recorder.close()
        self._recorder = None
        return path

    def flush_if_due(self) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.flush_if_due()

    def close(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.close()


def _install_switch(monitor: Monitor, secrets: tuple[str, ...]) -> RecordingSwitch:
    """Subscribe a RecordingSwitch to a started monitor's hub (flushed, closed at stop)."""
    switch = RecordingSwitch(monitor, secrets)
    hub = monitor.hub
    hub.subscribe(switch)
    hub.every(0.5, switch.flush_if_due)
    hub.add_closer(switch.close)
    return switch


def _seen(monitor: Monitor) -> tuple[ServerSeen, ...]:
    return tuple(_seen_one(i) for i in monitor.identities)


async def _call(action: Callable[[], Any]) -> Any:
    return action()


def _seen_one(identity: ServerIdentity) -> ServerSeen:
    return ServerSeen(
        identity.base_url, tuple(identity.models), identity.error, identity.context_lengths
    )


def _add_seen(monitor: Monitor, target: Target) -> ServerSeen:
    return _seen_one(monitor.add_target(target))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What a session attaches to (picklable: it is sent to the collector process)."""

    targets: tuple[Target, ...]
    api_key: str | None = None
    gpu: str = "none"
    """"local" (NVML), "none", or a dcgm-exporter URL (sources.gpu.make_sampler)."""
    interval: float = 1.0
    record: str | None = None
    redact: tuple[str, ...] = ()
    """`--redact` patterns: applied to answer text before it is written to a recording."""
    absolute_clock: bool = False
    """Timestamps on time.monotonic() instead of seconds since the start (for benchmarks)."""
    canary_s: float | None = None
    """Probe each attached server with the canary at most this often (docs/canary.md; watch
    --canary, chat's host mode); None: no canary."""
    canary_relearn: bool = False
    """The canaries learn their baselines again from this session's probes."""
    fleet: FleetSpec | None = None
    """The Prometheus whose vLLM targets are the session's servers (`specmon fleet`)."""
    baseline_tok_s: float | None = None
    """The vanilla decode tok/s the vanilla-speed flag compares against (`--baseline`); None:
    the stored baseline for the session's model, GPU and vLLM version, if any."""
    quiet: bool = False
    """The collector process writes nothing to the terminal (a full-screen app owns it)."""
    known: SessionInfo | None = None
    """What the command knows of the server beyond what it says (host mode: draft, method, K,
    the command line): completes the session's info and the recording's header."""
    stream_limits: StreamLimits = DEFAULT_LIMITS
    """The limits every chat answer streams under (idle timeout, answer size, line cap)."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values no recording holds besides the API key (host mode: those of the server's command
    line and environment)."""


def open_session(config: SessionConfig) -> CollectorProcess:
    """The one way a command opens a live session: the collector (hub, stream clients,
    scrapers, recorder) in its own process, so that rendering cannot delay arrival timestamps
    (docs/architecture.md); its events folded here into a SessionState whose vanilla baseline
    is `config.baseline_tok_s`, else the stored one. Not started: `start()` it (the app's
    connect worker does)."""
    return CollectorProcess(config, state_factory(config.baseline_tok_s))


class LiveSession(Protocol):
    """The session API the UI and the commands use (see the module docstring)."""

    def start(self) -> SessionInfo: ...

    def snapshot(self) -> dict[str, Any]: ...

    def subscribe(self, subscriber: Subscriber) -> None: ...

    def read(self, reader: Callable[[], Any]) -> Any: ...

    def view(self, *, fresh: bool = False) -> SessionView | None: ...

    @property
    def servers(self) -> tuple[ServerSeen, ...]: ...

    @property
    def alive(self) -> bool: ...

    def now(self) -> float: ...

    def submit_chat(
        self, request: ChatRequest, *, server: int = 0, request_id: str | None = None
    ) -> str: ...

    def cancel(self, request_id: str) -> None: ...

    def mark(self, label: str) -> None: ...

    @property
    def recording(self) -> str | None: ...

    def start_recording(self, path: str) -> str: ...

    def stop_recording(self) -> str | None: ...

    def add_target(self, target: Target) -> ServerSeen:
        """Watch one more server (blocking, bounded); raises with a one-line reason (a bad URL,
        a server already watched)."""
        ...

    def remove_target(self, url: str) -> str:
        """Stop watching a server (blocking, bounded); returns its base URL; raises with a
        one-line reason when it is not watched."""
        ...

    def stop(self) -> None: ...


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
        self._servers: tuple[ServerSeen, ...] = ()
        self._clock_offset: float | None = None
        """time.monotonic() minus the collector's session clock (both system-wide monotonic)."""
        self._calls: dict[int, concurrent.futures.Future[Any]] = {}
        self._call_ids = 0
        self._send_lock = threading.Lock()
        self._recording: str | None = config.record

    def launch(self) -> None:
        """Spawn the collector now, without waiting for it: it imports, identifies the servers
        and says hello while the caller does other work (the app its first frame); `start()`
        then waits for the hello. Does nothing when already launched."""
        if self._process is not None:
            return
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        self._conn = parent
        self._process = ctx.Process(
            target=collector_main,
            args=(self.config, child, os.getpid()),
            name="specmon-collector",
            daemon=True,
        )
        with _stderr_with_fd():
            self._process.start()
        child.close()
        self._receiver = threading.Thread(
            target=self._receive, name="specmon-session-receiver", daemon=True
        )
        self._receiver.start()

    def start(self) -> SessionInfo:
        """Launch the collector (unless `launch()` did) and wait for its hello (bounded)."""
        self.launch()
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
                if not conn.poll(PUBLISH_INTERVAL_S):
                    self._publish(due_only=False)  # the events paused: publish the last change
                    continue
                message = conn.recv()
                if not is_report(message):
                    self.errors.append(unknown(message))
                    continue
                if self._on_report(message):
                    break
        except (EOFError, OSError):
            pass
        finally:
            self._stopped.set()
            self._started.set()
            for future in list(self._calls.values()):
                if not future.done():
                    future.set_exception(RuntimeError("the session stopped"))
            self._calls.clear()

    def _on_report(self, report: Report) -> bool:
        """Handle one message of the collector (receiver thread); True once it stopped."""
        match report:
            case EventBatch(events=events):
                self._fold(events)
                self._publish(due_only=True)
            case Reply(token=token, value=value, error=error):
                future = self._calls.pop(token, None)
                if future is not None:
                    if error is None:
                        future.set_result(value)
                    else:
                        future.set_exception(RuntimeError(error))
            case Hello(info=info, servers=servers, clock_offset=offset):
                with self._lock:
                    self.info = info
                    self.state = self._state_factory(info)
                    self._servers = servers
                    self._clock_offset = offset
                self._started.set()
            case StartFailed(error=error):
                self._error = error
                self._started.set()
            case Stopped(errors=errors):
                self.errors.extend(errors)
                return True
            case _:
                assert_never(report)
        return False

    def _publish(self, *, due_only: bool) -> None:
        """Publish the state's view (receiver thread, under the fold lock): when due after a
        batch, or whenever it changed once the events pause."""
        with self._lock:
            state = self.state
            if state is None:
                return
            if due_only:
                state.publish_if_due(time.monotonic())
            else:
                publisher = getattr(state, "publisher", None)
                if publisher is None or publisher.dirty:
                    state.publish()

    def _fold(self, events: Sequence[Event]) -> None:
        with self._lock:
            state = self.state
            for event in events:
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

    def _send(self, message: Command) -> None:
        if self._conn is None or self._stopped.is_set():
            raise RuntimeError("the session is not running")
        with self._send_lock:  # the UI thread, the connect worker, a server's log reader
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

    def view(self, *, fresh: bool = False) -> SessionView | None:
        """The latest published view, read without a lock (None before the start). With
        `fresh`, or before the first publish, it is published now under the fold lock."""
        state = self.state
        if state is None:
            return None
        view = state.published_view
        if fresh or view is None:
            with self._lock:
                view = state.publish()
        return view

    @property
    def servers(self) -> tuple[ServerSeen, ...]:
        return self._servers

    @property
    def alive(self) -> bool:
        return self._started.is_set() and not self._stopped.is_set() and self.info is not None

    def now(self) -> float:
        """The collector's session clock, read here (the clock of every arrival time)."""
        offset = self._clock_offset
        return time.monotonic() - offset if offset is not None else 0.0

    def _request(self, make: Callable[[int], Call]) -> Any:
        """Send the command `make(token)` and wait for its reply (bounded)."""
        with self._lock:
            self._call_ids += 1
            token = self._call_ids
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._calls[token] = future
        self._send(make(token))
        return future.result(CALL_TIMEOUT_S)

    @property
    def recording(self) -> str | None:
        return self._recording

    def start_recording(self, path: str) -> str:
        result = str(self._request(lambda token: StartRecording(token, path)))
        self._recording = result
        return result

    def stop_recording(self) -> str | None:
        result = self._request(StopRecording)
        self._recording = None
        return None if result is None else str(result)

    def add_target(self, target: Target) -> ServerSeen:
        seen: ServerSeen = self._request(lambda token: AddTarget(token, target))
        with self._lock:
            self._servers = (*self._servers, seen)
        return seen

    def remove_target(self, url: str) -> str:
        base = str(self._request(lambda token: RemoveTarget(token, url)))
        with self._lock:
            self._servers = tuple(s for s in self._servers if s.base_url != base)
        return base

    def submit_chat(
        self, request: ChatRequest, *, server: int = 0, request_id: str | None = None
    ) -> str:
        rid = request_id or new_request_id()
        self._send(Chat(rid, request, server))
        return rid

    def cancel(self, request_id: str) -> None:
        self._send(Cancel(request_id))

    def mark(self, label: str) -> None:
        self._send(Mark(label))

    def post_log(self, source: str, line: str) -> None:
        """A line of the log of the server `source` that this process started (host mode): in
        the session (the log pane) and its recording. Dropped once the session has stopped."""
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            self._send(LogLine(source, line))

    def stop(self, timeout: float = STOP_TIMEOUT_S + 0.5) -> None:
        """Ask the collector to stop (it closes the recording), wait `timeout` at most, then end
        it by force. Safe to call twice, and from another thread while `start()` waits: a
        collector that has not said hello yet (still importing, or identifying a slow server)
        has nothing to close and cannot read the request yet, so it is ended at once."""
        process, conn = self._process, self._conn
        if process is None or conn is None:
            return
        # No hello yet (still importing or identifying, or its pipe already ended): nothing
        # to close, so no reason to wait for it.
        starting = self.info is None
        if starting:
            timeout = 0.0
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError, ValueError):
            if not self._stopped.is_set():
                conn.send(Stop())
        self._stopped.wait(max(0.0, deadline - time.monotonic()))
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            if not starting:
                self.errors.append("the collector did not stop in time: terminated")
            process.terminate()
            process.join(0.5)
            if process.is_alive():
                process.kill()
                process.join(0.5)
        with contextlib.suppress(OSError):
            conn.close()
        self._process = None


@contextlib.contextmanager
def _stderr_with_fd() -> Iterator[None]:
    """While spawning: a sys.stderr with a real file descriptor. A full-screen app (Textual)
    replaces sys.stderr with a capture whose fileno() is -1, and multiprocessing hands
    sys.stderr's descriptor to the resource tracker it starts ("bad value(s) in fds_to_keep")."""
    current = sys.stderr
    try:
        ok = current is not None and current.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        ok = False
    if ok or sys.__stderr__ is None:
        yield
        return
    sys.stderr = sys.__stderr__
    try:
        yield
    finally:
        sys.stderr = current


def _quiet_stdio() -> None:
    """Point this process's stdout and stderr at /dev/null: the collector of a full-screen app
    must not write over its screen (its errors go back over the pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


PARENT_POLL_S = 0.25
"""How often the collector checks that the process that started it is still alive."""


def _die_with_parent(parent_pid: int) -> None:
    """End this process soon after its parent dies. The pipe's end-of-file usually comes first
    and stops the collector cleanly (recording closed); a thread watching the parent's pid covers
    the rest. Not PR_SET_PDEATHSIG: Linux sends it when the *thread* that started the child ends,
    and the app starts the collector from a worker thread that Textual ends as the app quits: the
    collector was killed before it could stop, and the recording lost its last second (a chat
    quit while an answer streamed left the answer without its end)."""
    if os.getppid() != parent_pid:  # the parent died already
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        # The pipe's end-of-file has come too: give that clean stop (it ends the process) its
        # bound before ending it here.
        time.sleep(STOP_TIMEOUT_S + 0.5)
        os._exit(1)

    threading.Thread(target=watch, name="specmon-collector-parent", daemon=True).start()


def _warm_up(first_sent: threading.Event) -> None:
    """Import the stream client's HTTP stack (aiohttp, ~0.2 s) ahead of the first chat, once the
    first events went out (at most WARM_UP_AFTER_S after the hello): neither the start nor the
    first answer waits."""
    first_sent.wait(WARM_UP_AFTER_S)
    with contextlib.suppress(Exception):
        import aiohttp  # noqa: F401


def collector_main(config: SessionConfig, conn: Connection, parent_pid: int) -> None:
    """The collector process: hub + sources + recorder; events to `conn` in batches."""
    _die_with_parent(parent_pid)
    if config.quiet:
        _quiet_stdio()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    outbox: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
    first_sent = threading.Event()
    send_lock = threading.Lock()

    def send(message: Report) -> bool:
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
            if batch and not send(EventBatch(tuple(batch))):
                return
            first_sent.set()
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
        redact=config.redact,
        hub=hub,
        known=config.known,
        stream_limits=config.stream_limits,
        secrets=config.secrets,
        baseline=config.baseline_tok_s,
    )
    sending = threading.Thread(target=sender, name="specmon-collector-sender", daemon=True)
    sending.start()
    hub.subscribe(outbox.put)
    try:
        info = monitor.start()
        if config.fleet is not None:  # specmon fleet
            start_fleet(monitor, config.fleet)
        if config.canary_s is not None:  # watch --canary, chat's host mode
            start_canaries(monitor, config.canary_s, relearn=config.canary_relearn)
    except Exception as exc:
        send(StartFailed(f"{type(exc).__name__}: {_one_line(exc)}"))
        monitor.stop()
        return
    secrets = tuple(k for k in (config.api_key, *config.secrets) if k)
    switch = _install_switch(monitor, secrets)
    send(Hello(info, _seen(monitor), time.monotonic() - hub.clock()))
    threading.Thread(
        target=_warm_up, args=(first_sent,), name="specmon-collector-warm-up", daemon=True
    ).start()

    def answer(token: int, action: Callable[[], Any]) -> None:
        try:
            value = hub.submit(_call(action)).result(CALL_TIMEOUT_S - 1)
        except Exception as exc:
            send(Reply(token, error=_one_line(exc)))
        else:
            send(Reply(token, value))

    def answer_off_hub(token: int, action: Callable[[], Any]) -> None:
        """Run a blocking action that waits on the hub itself (adding or removing a target) on
        a thread of its own, so this loop keeps reading commands; the reply goes back alone."""

        def work() -> None:
            try:
                value = action()
            except Exception as exc:
                send(Reply(token, error=_one_line(exc)))
            else:
                send(Reply(token, value))

        threading.Thread(target=work, name="specmon-collector-target", daemon=True).start()

    running: dict[str, concurrent.futures.Future[RequestEnded]] = {}

    def forget(rid: str) -> Callable[[object], None]:
        def drop(_future: object) -> None:
            running.pop(rid, None)

        return drop

    def obey(command: Command) -> bool:
        """Carry out one command of the app; False: stop."""
        match command:
            case Stop():
                return False
            case Chat(request_id=rid, request=request, server=server):
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
            case Cancel(request_id=rid):
                found = running.get(rid)
                if found is not None:
                    found.cancel()
            case Mark(label=label):
                hub.post(Marker(t=hub.clock(), label=label))
            case LogLine(source=source, line=line):
                hub.post(ServerLogLine(t=hub.clock(), source=source, line=line))
            case StartRecording(token=token, path=path):
                answer(token, functools.partial(switch.start, path))
            case StopRecording(token=token):
                answer(token, switch.stop)
            case AddTarget(token=token, target=target):
                answer_off_hub(token, functools.partial(_add_seen, monitor, target))
            case RemoveTarget(token=token, url=url):
                answer_off_hub(token, functools.partial(monitor.remove_target, url))
            case _:
                assert_never(command)
        return True

    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break  # the parent is gone
            if not is_command(message):
                hub.errors.append(unknown(message))
                continue
            if not obey(message):
                break
    finally:
        monitor.stop()
        outbox.put(None)
        sending.join(STOP_TIMEOUT_S)
        send(Stopped(tuple(hub.errors)))
        with contextlib.suppress(OSError):
            conn.close()
        # Stopped cleanly (recording closed): skip the interpreter's teardown, which takes
        # longer than everything before it.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(0)
