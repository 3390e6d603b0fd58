"""`specmon serve`'s run, once its command line is read into a `ServePlan` (cli/serve_cmd.py):
host mode's plan and launch, then on a terminal the Textual app (its startup view, then the
dashboard; the session opens before vLLM starts, so its recording has every line vLLM prints),
otherwise progress lines on stderr and the plain dashboard on stdout; the server's whole process
group stopped on every way out (docs/host.md)."""

from __future__ import annotations

import collections
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specmon.runtime.host_plan import HostFlags
from specmon.runtime.one_line import fail

if TYPE_CHECKING:
    from specmon.core.events import SessionInfo
    from specmon.runtime.host_plan import HostPlan
    from specmon.runtime.hub import Hub
    from specmon.runtime.monitor import Monitor
    from specmon.runtime.session import LiveSession
    from specmon.sources.host.process import HostedServer

NAME = "serve"


@dataclass(frozen=True, slots=True)
class ServePlan:
    """What `specmon serve` does, read from its command line (`plan_from`)."""

    host: HostFlags
    theme: str | None = None
    export: tuple[str, int] | None = None
    record: str | None = None
    gpu: str = "local"
    interval: float = 1.0
    baseline: float | None = None
    api_key: str | None = field(default=None, repr=False)
    """The environment's key (a hosted server started with --api-key)."""


def run_serve(plan: ServePlan) -> int:
    """`specmon serve` from its plan: the app on a terminal, else progress lines and the plain
    dashboard; the exit status (see `specmon serve --help`)."""
    from specmon.runtime.host_launch import plan_or_exit, raise_stop_grace, stop_signals

    host = plan_or_exit(plan.host, "serve")
    if isinstance(host, int):
        return host
    raise_stop_grace()
    from specmon.runtime.terminal import on_terminal

    with stop_signals():
        return _hosted_app(plan, host) if on_terminal() else _host(plan, host)


def _hosted_app(serve: ServePlan, plan: HostPlan) -> int:
    """On a terminal: the Textual app, its startup view first, then the dashboard. The session
    (its collector process) opens before vLLM starts, so that its recording has every line
    vLLM prints; the server is added to it once it answers /health 200."""
    from specmon.runtime.host_launch import (
        AppHost,
        Terminated,
        launch_or_exit,
        ready_timeout,
        stop_server,
        stopped_status,
    )
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import SessionConfig, open_session
    from specmon.ui.app_runner import Dashboard, run_dashboard

    config = SessionConfig(
        (),
        gpu=serve.gpu,
        interval=serve.interval,
        record=serve.record,
        quiet=True,
        known=plan.session_info(),
        baseline_tok_s=serve.baseline,
        secrets=plan.command.secrets,
        api_key=serve.api_key,
    )
    session = open_session(config)
    server: HostedServer | None = None
    try:
        try:
            session.start()
        except RuntimeError as exc:  # the recording cannot be written
            return fail(NAME, str(exc).removeprefix("RecordingError: "))
        source = plan.command.base_url
        launched = launch_or_exit(plan, NAME, on_line=lambda line: session.post_log(source, line))
        if isinstance(launched, int):
            return launched
        server = running = launched

        def opened() -> LiveSession:  # called once the server answered /health 200
            session.add_target(Target(running.base_url))
            return session

        return run_dashboard(
            lambda: config,
            Dashboard(NAME, "watch", theme=serve.theme, export=serve.export),
            host=AppHost(running, plan, ready_timeout(serve.host)),
            opened=opened,
            # The server first: its last lines still reach the session and its recording.
            before_close=running.stop,
        )
    except (KeyboardInterrupt, Terminated) as stop:
        return stopped_status(stop)
    finally:
        stop_server(server, NAME)
        session.stop()


def _host(serve: ServePlan, plan: HostPlan) -> int:
    from specmon.core.errors import RecordingError
    from specmon.core.events import ServerLogLine
    from specmon.core.server_state import MAX_LOG_TAIL
    from specmon.runtime.baseline import recorded_baseline
    from specmon.runtime.host_launch import (
        Terminated,
        launch_or_exit,
        stop_server,
        stopped_status,
        wait_in_text,
    )
    from specmon.runtime.hub import Hub
    from specmon.runtime.recorder import Recorder

    hub = Hub().start()
    source = plan.command.base_url
    early: collections.deque[ServerLogLine] = collections.deque(maxlen=MAX_LOG_TAIL)

    def keep(event: Any) -> None:  # the startup lines, for the dashboard's log once it starts
        if isinstance(event, ServerLogLine):
            early.append(event)

    hub.subscribe(keep)

    def post(line: str) -> None:
        if hub.running:
            try:
                hub.post(ServerLogLine(t=hub.clock(), source=source, line=line))
            except RuntimeError:  # the hub is stopping
                return

    server: HostedServer | None = None
    try:
        if serve.record:
            # Subscribed before launch, so the recording has every line vLLM prints.
            try:
                known = plan.session_info()
                recorder = Recorder(
                    serve.record,
                    known,
                    secrets=plan.command.secrets,
                    # the baseline the session judges with (the state's factory warns once)
                    baseline=recorded_baseline(serve.baseline, known, warn=lambda _m: None),
                )
            except RecordingError as exc:
                return fail(NAME, str(exc))
            hub.subscribe(recorder)
            hub.every(0.5, recorder.flush_if_due)
            hub.add_closer(recorder.close)
        launched = launch_or_exit(plan, "serve", on_line=post)
        if isinstance(launched, int):
            return launched
        server = launched
        ready = wait_in_text(server, serve.host)
        if ready is None:
            return 1
        info = plan.session_info(ready)
        server.session_info = info
        return _dashboard(serve, hub, server, info, early)
    except (KeyboardInterrupt, Terminated) as stop:
        return stopped_status(stop)
    finally:
        # Stop the server first (its last lines still reach the hub), then the hub: the
        # recorder's closer fsyncs the file.
        stop_server(server, "serve")
        hub.stop()


def _monitor(
    serve: ServePlan,
    hub: Hub,
    server: HostedServer,
    info: SessionInfo,
    early: collections.deque[Any],
) -> Monitor:
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sources.gpu import make_sampler

    make_state = state_factory(serve.baseline)

    def factory(merged: SessionInfo) -> Any:
        # What host mode knows (draft, method, K, command, preset) completes what the server
        # says about itself (`known` below); the startup lines fill the log.
        state = make_state(merged)
        for event in hub.read(lambda: list(early)):
            state.apply(event)
        return state

    return Monitor(
        [Target(server.base_url)],
        factory,
        api_key=serve.api_key,
        gpu=make_sampler(serve.gpu),
        interval=serve.interval,
        hub=hub,
        known=info,
    )


def _dashboard(
    serve: ServePlan,
    hub: Hub,
    server: HostedServer,
    info: SessionInfo,
    early: collections.deque[Any],
) -> int:
    from specmon.ui.app_runner import show_console

    monitor = _monitor(serve, hub, server, info, early)
    monitor.start()
    done = threading.Event()

    def watch_exit() -> None:  # the dashboard ends when the server dies
        server.process.wait()
        done.set()

    threading.Thread(target=watch_exit, name="vllm-exit", daemon=True).start()
    show_console(monitor, done=done, banner=f"ready: {server.base_url} (Ctrl-C stops the server)")
    code = server.poll()
    if code is not None:
        error = server.failure(f"the server exited with code {code} while serving")
        print(error.failure(after_ready=True).report(), file=sys.stderr)
        return 1
    return 0
