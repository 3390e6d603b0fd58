"""Connecting to the server, for the chat and the dashboard alike: "connecting…", then either
nothing (the box hides) or why it failed with a Retry button (ctrl+r), and, when trying again
can help (the server was not up yet), an automatic retry with backoff, said on screen
("retrying in 4 s"). A refused API key or a model the server does not serve is not retried:
only the user can fix those.

The connection is made off the UI thread (`connect` blocks); the box posts `Connected` with its
outcome and the screen takes it from there (header, too-small check, ...).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Button, Static
from textual.worker import Worker, WorkerState

from specmon.ui.formatting import visible
from specmon.ui.port import Connection

RETRY_DELAYS_S: tuple[float, ...] = (2.0, 4.0, 8.0, 15.0, 30.0)
"""The waits before each automatic retry; the last one repeats (every 30 s until it connects)."""


class ConnectBox(Horizontal):
    """The connection's state, the Retry button and the automatic retries."""

    DEFAULT_CSS = """
    ConnectBox { height: auto; padding: 0 1; }
    ConnectBox #connect-status { width: 1fr; color: $error; }
    ConnectBox #retry { width: auto; }
    """

    class Connected(Message):
        """A connection attempt ended (`connection.server` is None when it failed)."""

        def __init__(self, connection: Connection) -> None:
            super().__init__()
            self.connection = connection

    def __init__(self, connect: Callable[[], Connection], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._connect = connect
        self.failures = 0
        """Failed attempts in a row (the backoff step)."""
        self._retry_timer: Timer | None = None
        self.retry_in_s: float | None = None
        """The wait before the next automatic retry (None: none planned)."""

    def compose(self) -> ComposeResult:
        yield Static("connecting…", id="connect-status", markup=False)
        yield Button("Retry", id="retry", compact=True)  # one line, beside a one-line banner

    def on_mount(self) -> None:
        self.query_one("#retry", Button).display = False

    def start(self) -> None:
        """Connect now (a planned automatic retry is dropped)."""
        self._cancel_retry()
        self.display = True
        self.query_one("#retry", Button).display = False
        self.query_one("#connect-status", Static).update("connecting…")
        self.run_worker(self._connect, thread=True, group="connect", exclusive=True)

    def _cancel_retry(self) -> None:
        if self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None
        self.retry_in_s = None

    def on_unmount(self) -> None:
        self._cancel_retry()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "connect":
            return
        event.stop()
        if event.state == WorkerState.SUCCESS:
            result = event.worker.result
            assert isinstance(result, Connection)
            self._ended(result)
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            self._ended(Connection(None, f"{type(error).__name__}: {error}"))

    def _ended(self, connection: Connection) -> None:
        if connection.server is not None:
            self.failures = 0
            self.display = False
        else:
            self.failures += 1
            message = connection.error or "cannot connect"
            if connection.unauthorized:
                message = "401 Unauthorized: the server refused the API key. " + message
            message += "  (Retry: ctrl+r)"
            if connection.retryable and not connection.unauthorized:
                step = min(self.failures, len(RETRY_DELAYS_S)) - 1
                self.retry_in_s = RETRY_DELAYS_S[step]
                self._retry_timer = self.set_timer(self.retry_in_s, self.start)
                message += f"  retrying in {self.retry_in_s:g} s"
            self.query_one("#connect-status", Static).update(Text(visible(message)))
            self.query_one("#retry", Button).display = True
        self.post_message(self.Connected(connection))

    @on(Button.Pressed, "#retry")
    def _retry_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.start()
