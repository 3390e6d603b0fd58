"""The servers table of `specmon watch` (the app's dashboard): draws the text that
ui.servers_text builds (one row per watched server, one sub-row per engine), at the widget's
width. `specmon watch --once` prints the same text."""

from __future__ import annotations

from textual.widgets import Static

from specmon.core.views import SessionView
from specmon.ui.servers_text import (
    COLUMNS,
    DROP_ORDER,
    EMPTY_TEXT,
    ERROR_WIDTH,
    MIN_NAME_WIDTH,
    NAME_WIDTH,
    RESTART_SHOWN_S,
    TableLayout,
    engine_cells,
    gpu_numbers,
    header_line,
    layout_for,
    row_width,
    server_cells,
    server_gpus,
    short_name,
    state_word,
    table_text,
)
from specmon.ui.styles import theme_styles

__all__ = [
    "COLUMNS",
    "DROP_ORDER",
    "EMPTY_TEXT",
    "ERROR_WIDTH",
    "MIN_NAME_WIDTH",
    "NAME_WIDTH",
    "RESTART_SHOWN_S",
    "ServersTable",
    "TableLayout",
    "engine_cells",
    "gpu_numbers",
    "header_line",
    "layout_for",
    "row_width",
    "server_cells",
    "server_gpus",
    "short_name",
    "state_word",
    "table_text",
]


class ServersTable(Static):
    """Draws `table_text` for the latest view; the screen owns the selection."""

    DEFAULT_CSS = """
    ServersTable {
        height: auto;
        padding: 0 1;
        border: round $primary;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)
        self.border_title = "servers"
        self._shown = ""

    def show(
        self, view: SessionView | None, selected: int, *, waiting: str = "connecting…"
    ) -> None:
        """Redraw when the text changed."""
        width = self.content_region.width or None  # 0 before the first layout: every column
        text = table_text(
            view,
            selected,
            waiting=waiting,
            width=width,
            styles=theme_styles(self.app.theme_variables),
        )
        key = text.plain + repr(text.spans)
        if key != self._shown:
            self._shown = key
            self.update(text)
