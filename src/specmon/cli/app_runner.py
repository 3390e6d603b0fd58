"""Running the Textual app from a command: the same start and stop for chat, demo and watch."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the commands' run(), not when `specmon --help` registers
    from specmon.ui.app.app import SpecmonApp
    from specmon.ui.app.session_port import SessionPort


def run_app(app: SpecmonApp, port: SessionPort) -> int:
    """Run `app` until it exits, then stop its session (recording closed). On Ctrl-C or SIGTERM
    a connection still being made is abandoned at once: Textual's exit waits for the worker
    thread that makes it, and the clean stop must finish within the shutdown's bound."""
    from specmon.runtime import shutdown

    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        process_shutdown.add_stop_hook(port.abort)
    try:
        app.run()
    finally:
        port.close()
    return 0
