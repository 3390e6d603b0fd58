"""The dashboard screen of `specmon watch`: the servers table, the selected server in detail, and
the dialog that adds a server.

Keys: ↑/↓ (or k/j) select a server, whose numbers the dashboard's panel shows below the table;
a adds a server (an http(s) address, checked before anything is sent), x or delete stops watching
the selected one; r records, m adds a marker, F4 lists the answers, ctrl+r retries the connection,
q or ctrl+q quits. Adding and removing run off the UI thread (they wait on the collector).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.worker import Worker, WorkerState

from specmon.core.views import SessionView
from specmon.ui.port import Connection, SessionPort
from specmon.ui.screens.dialogs import AddServerScreen, AnswersScreen
from specmon.ui.screens.recording import RecordingScreen
from specmon.ui.widgets.connect_box import ConnectBox
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.servers_table import ServersTable
from specmon.ui.widgets.side_panel import SidePanel
from specmon.ui.widgets.turn import HeaderBar

MEDIUM_WIDTH = 100
"""From this many columns the dashboard's sections sit two a row."""
WIDE_WIDTH = 150
"""From this many, three a row."""
PANEL_HZ = 4.0
"""The table's and the panel's numbers are redrawn this often."""


class DashboardScreen(RecordingScreen):
    """`specmon watch` on a terminal: the servers table and the selected server in detail."""

    AUTO_FOCUS = None  # the arrows select servers; nothing else on the screen takes them
    # Textual declares these `ClassVar[...] | None`, which mypy reads as an instance variable.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-narrow"),
        (MEDIUM_WIDTH, "-medium"),
        (WIDE_WIDTH, "-wide"),
    ]
    """The dashboard's sections in one column below MEDIUM_WIDTH (80x24: PgUp/PgDn scroll
    them), two below WIDE_WIDTH, three from there (app.tcss)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Help and quit first, as on every screen (the footer never leaves them out). Priority,
        # so that this ctrl+q (not the app's hidden one) is the footer's.
        Binding("f1", "app.help", "help"),
        Binding("ctrl+q", "app.quit", "quit", priority=True),
        Binding("up", "select(-1)", "select server", key_display="↑↓", priority=True),
        Binding("q", "app.quit", "quit", show=False),
        Binding("down", "select(1)", "select next", show=False, priority=True),
        Binding("k", "select(-1)", "select previous", show=False),
        Binding("j", "select(1)", "select next", show=False),
        Binding("a", "add_server", "add server"),
        Binding("x", "remove_server", "remove server"),
        Binding("delete", "remove_server", "remove server", show=False),
        Binding("f4", "answers", "answers"),
        Binding("r", "record", "record"),
        Binding("m", "marker", "marker"),
        Binding("ctrl+r", "retry", "retry connect"),
        Binding("pagedown", "scroll_dashboard(1)", "scroll", key_display="PgDn"),
        Binding("pageup", "scroll_dashboard(-1)", "scroll up", show=False),
    ]

    def __init__(self, port: SessionPort) -> None:
        super().__init__()
        self.port = port
        self.connection: Connection | None = None
        self.selected_source: str | None = None
        """The selected server's address (kept across views: rows may come and go)."""
        self.selected = 0
        """Its row in the latest view."""

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header", command="watch")
        yield ConnectBox(self.port.connect, id="connect-box")
        yield ServersTable(id="servers")
        yield SidePanel(id="dashboard")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_interval(1 / PANEL_HZ, self.refresh_panel)
        self.refresh_panel()
        self.connect()

    # ------------------------------------------------------------ connecting

    def connect(self) -> None:
        self.query_one(ConnectBox).start()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if not self._record_worker_done(event):
            self._target_worker_done(event)

    @on(ConnectBox.Connected)
    def _connected(self, event: ConnectBox.Connected) -> None:
        self.connection = event.connection
        self.query_one(HeaderBar).show(event.connection.server)

    def action_retry(self) -> None:
        if self.port.connected:
            self.app.notify("already connected: nothing to retry", timeout=3)
        else:
            self.connect()

    # ------------------------------------------------------------ drawing

    def _follow_selection(self, view: SessionView | None) -> None:
        """Keep the same server selected when rows come and go; clamp when it left."""
        servers = view.servers if view is not None else ()
        if not servers:
            self.selected = 0
            return
        sources = [s.source for s in servers]
        if self.selected_source in sources:
            self.selected = sources.index(self.selected_source)
        else:
            self.selected = min(self.selected, len(servers) - 1)
            self.selected_source = sources[self.selected]

    def refresh_panel(self) -> None:
        c = self.connection
        waiting = "not connected" if c is not None and c.server is None else "connecting…"
        view = self.port.view()
        self._follow_selection(view)
        self.query_one(ServersTable).show(view, self.selected, waiting=waiting)
        self.query_one(SidePanel).show(view, None, waiting=waiting, server_index=self.selected)

    def _say(self, text: str, *, failed: bool = False) -> None:
        self.app.notify(text, markup=False, severity="error" if failed else "information")
        self.query_one(SidePanel).note(text)

    # ------------------------------------------------------------ keys

    def action_select(self, step: int) -> None:
        view = self.port.view()
        servers = view.servers if view is not None else ()
        if not servers:
            return
        self._follow_selection(view)
        self.selected = max(0, min(len(servers) - 1, self.selected + step))
        self.selected_source = servers[self.selected].source
        self.refresh_panel()

    def action_scroll_dashboard(self, pages: int) -> None:
        """PgUp/PgDn: the selected server's sections a page at a time (the arrows select)."""
        panel = self.query_one(SidePanel)
        if pages > 0:
            panel.scroll_page_down(animate=False)
        else:
            panel.scroll_page_up(animate=False)

    def action_answers(self) -> None:
        self.app.push_screen(AnswersScreen(self.port))

    def action_add_server(self) -> None:
        if not self.port.connected:
            self._say("not connected: no server added", failed=True)
            return

        def add(chosen: tuple[str, str | None] | None) -> None:
            if chosen is None:
                return
            url, key = chosen
            self._say(f"adding {url}…")

            def adding() -> str:
                if key is None:
                    return self.port.add_target(url)
                return self.port.add_target(url, api_key=key)

            self.run_worker(adding, thread=True, group="target", exclusive=False)

        self.app.push_screen(AddServerScreen(), add)

    def action_remove_server(self) -> None:
        view = self.port.view()
        if not self.port.connected or view is None or not view.servers:
            self._say("no server to remove", failed=True)
            return
        self._follow_selection(view)
        source = view.servers[self.selected].source

        def remove() -> str:
            return f"removed {self.port.remove_target(source)}"

        self.run_worker(remove, thread=True, group="target", exclusive=False)

    def _target_worker_done(self, event: Worker.StateChanged) -> bool:
        """Say what adding or removing a server did; True when the event was such a worker's."""
        if event.worker.group != "target":
            return False
        if event.state == WorkerState.SUCCESS:
            result = str(event.worker.result)
            self._say(result if result.startswith("removed") else f"watching {result}")
            self.refresh_panel()
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            reason = " ".join(str(error).split()) or type(error).__name__
            self._say(f"server not changed: {reason}", failed=True)
        return True
