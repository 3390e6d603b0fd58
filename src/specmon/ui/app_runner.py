"""Running a command's screen: the Textual app (the same start and stop for chat, demo, watch,
replay and serve), or without it the plain lines (watch, demo, serve).

    run_dashboard(config, dashboard)   a live session (runtime.session.open_session) in the app:
                                       chat, demo, watch, fleet and chat's host mode
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported by the commands' run(), not when `specmon --help` registers
    import threading
    from collections.abc import Callable

    from textual.app import App

    from specmon.runtime.exporter import Exporter
    from specmon.runtime.host_launch import AppHost
    from specmon.runtime.monitor import Monitor
    from specmon.runtime.session import LiveSession, SessionConfig
    from specmon.ui.app import SpecmonApp
    from specmon.ui.chat_history import ChatHistory
    from specmon.ui.conversation import ChatSettings
    from specmon.ui.host import LogSource
    from specmon.ui.port import SessionPort


def run_textual(app: App[Any]) -> int:
    """Run `app` on the terminal and return its exit status: 0 after quit, 1 when Textual
    reported an error in it. The terminal is put back as soon as the app returns (before the
    command prints anything after it, which then stays on the shell's screen:
    runtime.shutdown's `app_screen`). Ctrl-C in the app (a key there: return code 130) raises
    KeyboardInterrupt once the app has closed, so the command stops and exits as after SIGINT
    (130, "interrupted")."""
    from specmon.runtime import shutdown
    from specmon.ui.app import INTERRUPTED

    process_shutdown = shutdown.current()
    if process_shutdown is None:
        app.run()
    else:
        process_shutdown.on_signal(_closing(app))
        try:
            with process_shutdown.app_screen():
                app.run()
        finally:
            process_shutdown.on_signal(None)
        if process_shutdown.requested.is_set():
            raise KeyboardInterrupt  # the command stops as after the signal (130, 143 or 129)
    code = app.return_code or 0
    if code == INTERRUPTED:
        raise KeyboardInterrupt
    return code


def _closing(app: App[Any]) -> Callable[[], None]:
    """The first stop signal while `app` runs: it closes the app from the app's own event loop.
    Raised where the loop happens to be, KeyboardInterrupt lands inside one of Textual's
    handlers as often as not, and Textual then reports it as the app's error, with a traceback
    on the shell's screen. Called in the signal handler, on the main thread the app runs on:
    `call_soon_threadsafe` is the one loop call made for that."""
    from specmon.ui.app import INTERRUPTED

    def close() -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # the app's loop is not running (yet, or any more)
            raise KeyboardInterrupt from None
        loop.call_soon_threadsafe(exit_once_mounted)

    def exit_once_mounted() -> None:
        # A screen still being mounted (the chat's, just after the start-up screen) would go on
        # to query widgets the exit has already taken down: exit once it is mounted.
        screen = app.screen_stack[-1] if app.screen_stack else None
        if screen is not None and not screen.is_mounted:
            app.call_after_refresh(exit_once_mounted)
            return
        app.exit(return_code=INTERRUPTED)

    return close


def run_app(
    app: SpecmonApp,
    port: SessionPort,
    *,
    export: tuple[str, int] | None = None,
    command: str = "",
    before_close: Callable[[], object] | None = None,
) -> int:
    """Run `app` until it exits (`run_textual`: Ctrl-C in it raises KeyboardInterrupt), then
    stop its session (recording closed). On Ctrl-C or SIGTERM a connection still being made is
    abandoned at once: Textual's exit waits for the worker thread that makes it, and the clean
    stop must finish within the shutdown's bound.

    `export` (`--export`): specmon's /metrics served from the session's view while the app runs;
    a port in use is a one-line error (exit 2) before the app starts. `before_close`: called
    when the app has ended, before the session stops (host mode stops its server there, so
    that the server's last lines still reach the session and its recording)."""
    from specmon.runtime import shutdown
    from specmon.runtime.one_line import fail

    exporter: Exporter | None = None
    if export is not None:  # prometheus_client only when asked for (the first paint waits)
        from specmon.runtime.exporter import ExporterError, start_exporter

        try:
            exporter = start_exporter(export, port.view, command)
        except ExporterError as exc:
            return fail(command, str(exc))
    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        process_shutdown.add_stop_hook(port.abort)
    try:
        return run_textual(app)
    finally:
        if before_close is not None:
            before_close()
        port.close()
        if exporter is not None:
            exporter.stop()


@dataclass(frozen=True, slots=True)
class Dashboard:
    """How a command shows its live session in the app (`run_dashboard`)."""

    command: str
    """The command's name, in its messages (`specmon chat: ...`)."""
    mode: Literal["chat", "demo", "watch"]
    """The app's first screen: the chat (chat, demo) or the dashboard (watch, fleet, serve)."""
    theme: str | None = None
    export: tuple[str, int] | None = None
    """`--export`: specmon's /metrics served from the session's view while the app runs."""
    model: str | None = None
    """The model to chat with (None: the first the server lists)."""
    settings: ChatSettings | None = None
    system: str | None = None
    auto_prompts: tuple[str, ...] = ()
    """The demo's prompts, sent one after another."""
    max_answers: int | None = None
    """Quit once this many answers have finished (demo --requests)."""
    idle_timeout_s: float | None = None
    """The stream idle timeout the collector applies (shown while an answer waits)."""


def run_dashboard(
    config: Callable[[], SessionConfig],
    dashboard: Dashboard,
    *,
    host: AppHost | None = None,
    server_log: LogSource | None = None,
    chat_history: ChatHistory | None = None,
    opened: Callable[[], LiveSession] | None = None,
    before_close: Callable[[], object] | None = None,
) -> int:
    """The app on a live session until it is quit: the one assembly of a session
    (`runtime.session.open_session`), its port and the app for every command with a live
    screen. `config` is called in the app's connect worker (the runtime is imported there, so
    the first frame does not wait for it); in host mode once the server answered /health 200,
    its `known` then completed by the host. Returns the exit status: 1 when the hosted server
    failed to start or died (the report printed once the app closed). `opened`: the session
    the port connects through when the command opened it itself (`specmon serve`, whose
    recording starts before vLLM does), instead of one opened on `config()`; `before_close`:
    see `run_app`."""
    from specmon.runtime import shutdown
    from specmon.ui.app import SpecmonApp
    from specmon.ui.live_port import LivePort

    def make_session() -> Any:
        from dataclasses import replace

        from specmon.runtime.session import open_session

        if opened is not None:
            return opened()
        made = config()
        if host is not None:  # what host mode knows completes what the server says
            made = replace(made, known=host.session_info())
        return open_session(made)

    watching = dashboard.mode == "watch"
    if dashboard.idle_timeout_s is None:
        port = LivePort(make_session, model=dashboard.model, require_model=not watching)
    else:
        port = LivePort(
            make_session,
            model=dashboard.model,
            require_model=not watching,
            idle_timeout_s=dashboard.idle_timeout_s,
        )
    app = SpecmonApp(
        port,
        settings=dashboard.settings,
        system=dashboard.system,
        mode=dashboard.mode,
        auto_prompts=dashboard.auto_prompts,
        max_answers=dashboard.max_answers,
        theme=dashboard.theme,
        host=host,
        server_log=server_log,
        chat_history=chat_history,
    )
    process_shutdown = shutdown.current()
    if host is not None and process_shutdown is not None:  # the startup wait abandoned too
        process_shutdown.add_stop_hook(host.abort)
    code = run_app(
        app, port, export=dashboard.export, command=dashboard.command, before_close=before_close
    )
    if code != 0:
        return code
    if app.host_failure is not None:
        print(app.host_failure.report(), file=sys.stderr)
        return 1
    return 0


def show_console(monitor: Monitor, *, done: threading.Event, banner: str | None = None) -> None:
    """The monitor without the app, until `done` is set (Ctrl-C propagates): `banner` (when
    given), then one plain line per server status and per finished request on stdout."""
    from specmon.ui.live_console import run_plain

    def final_view() -> Any:
        return monitor.view(fresh=True)

    if banner is not None:
        print(banner, flush=True)
    run_plain(monitor.view, done=done, write=lambda s: print(s, flush=True), final_view=final_view)
