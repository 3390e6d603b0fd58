"""The log of the server specmon runs (a hosted vLLM, or the demo's simulator) over the lower part
of the running chat or dashboard (l / ctrl+l)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from specmon.ui.formatting import visible
from specmon.ui.host import LogSource
from specmon.ui.widgets.log_pane import LogPane


class LogScreen(ModalScreen[None]):
    """The log pane over the lower part of the running chat or dashboard."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close log"),
        Binding("l", "close", "close log", show=False),
        Binding("ctrl+l", "close", "close log", show=False),
    ]

    DEFAULT_CSS = """
    LogScreen {
        align: center bottom;
        background: $background 30%;
    }
    LogScreen > #log-box {
        height: 60%;
        width: 100%;
        background: $surface;
    }
    LogScreen #log-where {
        color: $text-muted;
        width: 100%;
    }
    """

    def __init__(self, source: LogSource, *, title: str = "vLLM log") -> None:
        super().__init__()
        self.source = source
        self.log_title = title

    def compose(self) -> ComposeResult:
        with Vertical(id="log-box"):
            yield Label(
                f"{self.log_title}: {visible(self.source.log_path)}  (l, ctrl+l or Esc closes)",
                id="log-where",
                markup=False,
            )
            yield LogPane(self.source, title=self.log_title, id="log-pane")

    def action_close(self) -> None:
        self.dismiss(None)
