"""Running a command's screen: the Textual app (the same start and stop for chat, demo, watch,
replay and serve), or without it the plain lines (watch, demo, serve)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

# The terminal check's home is runtime/terminal.py; the commands still import it from here.
from specmon.runtime.terminal import WEB_DRIVER as WEB_DRIVER
from specmon.runtime.terminal import served_to_browser as served_to_browser
from specmon.runtime.terminal import wants_app as wants_app

if TYPE_CHECKING:  # imported by the commands' run(), not when `specmon --help` registers
    import threading
    from collections.abc import Callable

    from textual.app import App

    from specmon.runtime.exporter import Exporter
    from specmon.runtime.monitor import Monitor
    from specmon.ui.app import SpecmonApp
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
) -> int:
    """Run `app` until it exits (`run_textual`: Ctrl-C in it raises KeyboardInterrupt), then
    stop its session (recording closed). On Ctrl-C or SIGTERM a connection still being made is
    abandoned at once: Textual's exit waits for the worker thread that makes it, and the clean
    stop must finish within the shutdown's bound.

    `export` (`--export`): specmon's /metrics served from the session's view while the app runs;
    a port in use is a one-line error (exit 2) before the app starts."""
    from specmon.cli.args import fail
    from specmon.runtime import shutdown

    exporter: Exporter | None = None
    if export is not None:  # prometheus_client only when asked for (the first paint waits)
        from specmon.cli.export_args import start_exporter
        from specmon.runtime.exporter import ExporterError

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
        port.close()
        if exporter is not None:
            exporter.stop()


def show_console(monitor: Monitor, *, done: threading.Event, banner: str | None = None) -> None:
    """The monitor without the app, until `done` is set (Ctrl-C propagates): `banner` (when
    given), then one plain line per server status and per finished request on stdout."""
    from specmon.ui.live_console import run_plain

    def final_view() -> Any:
        return monitor.view(fresh=True)

    if banner is not None:
        print(banner, flush=True)
    run_plain(monitor.view, done=done, write=lambda s: print(s, flush=True), final_view=final_view)
