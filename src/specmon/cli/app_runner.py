"""Running the Textual app from a command: the same start and stop for chat, demo and watch."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the commands' run(), not when `specmon --help` registers
    from specmon.runtime.exporter import Exporter
    from specmon.ui.app import SpecmonApp
    from specmon.ui.port import SessionPort

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
"""The Textual driver that textual-serve (`specmon web`) sets in TEXTUAL_DRIVER for the app
process it starts per browser session: stdin and stdout are then its pipes, not a terminal."""


def served_to_browser() -> bool:
    """True in an app process started by textual-serve (`specmon web`)."""
    return os.environ.get("TEXTUAL_DRIVER", "") == WEB_DRIVER


def wants_app() -> bool:
    """Whether a command that has a Textual screen should open it: on a terminal (stdin and
    stdout both ttys), or when textual-serve runs it for a browser."""
    return served_to_browser() or (sys.stdout.isatty() and sys.stdin.isatty())


def run_app(
    app: SpecmonApp,
    port: SessionPort,
    *,
    export: tuple[str, int] | None = None,
    command: str = "",
) -> int:
    """Run `app` until it exits, then stop its session (recording closed). On Ctrl-C or SIGTERM
    a connection still being made is abandoned at once: Textual's exit waits for the worker
    thread that makes it, and the clean stop must finish within the shutdown's bound.

    `export` (`--export`): specmon's /metrics served from the session's view while the app runs;
    a port in use is a one-line error (exit 2) before the app starts."""
    from specmon.runtime import shutdown

    exporter: Exporter | None = None
    if export is not None:  # prometheus_client only when asked for (the first paint waits)
        from specmon.cli.export_args import start_exporter
        from specmon.runtime.exporter import ExporterError

        try:
            exporter = start_exporter(export, port.view, command)
        except ExporterError as exc:
            print(f"specmon {command}: {exc}", file=sys.stderr)
            return 2
    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        process_shutdown.add_stop_hook(port.abort)
    try:
        app.run()
    finally:
        port.close()
        if exporter is not None:
            exporter.stop()
    return 0
