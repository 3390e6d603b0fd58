"""The hosted vLLM server's own log, shown literally: a bounded pane and the screen that shows it
over the chat or the dashboard (toggled with `l` or ctrl+l).

Log text is untrusted: every control character becomes a visible stand-in (`safe_text.visible`, so
an ANSI escape shows as `␛[31m` and cannot act on the terminal), and Textual's `Log` widget never
parses markup, so `[bold]` or `[@click=...]` stay text. The pane keeps at most `LOG_PANE_LINES`
lines and pulls new ones from its source at `PULL_HZ` (never per line from the log thread).
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Log

from specmon.ui.app.safe_text import visible

LOG_PANE_LINES = 1000
"""The most lines the pane keeps (older ones scroll away)."""
PULL_HZ = 4.0
"""How often the pane asks its source for new lines."""


class LogSource(Protocol):
    """Where the lines come from (the cli adapts the hosted server to it)."""

    @property
    def log_path(self) -> str: ...

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        """(count of lines so far, the lines after the first `seen` of them)."""
        ...


def shown_line(line: str) -> str:
    """One log line as the pane shows it: control characters made visible."""
    return visible(line)


class LogPane(Log):
    """The server's log lines, literally, bounded, following the end."""

    DEFAULT_CSS = """
    LogPane {
        height: 1fr;
        overflow: auto auto;
        border: round $secondary;
        border-title-color: $text-muted;
    }
    """

    def __init__(
        self,
        source: LogSource,
        *,
        max_lines: int = LOG_PANE_LINES,
        id: str | None = None,
    ) -> None:
        super().__init__(highlight=False, max_lines=max_lines, auto_scroll=True, id=id)
        self.source = source
        self._seen = 0
        self.border_title = "vLLM log"

    def on_mount(self) -> None:
        self.pull()
        self.set_interval(1.0 / PULL_HZ, self.pull)

    def pull(self) -> None:
        """Append the lines that arrived since the last pull."""
        total, lines = self.source.lines_after(self._seen)
        self._seen = total
        if lines:
            self.write_lines([shown_line(line) for line in lines])

    def show_only(self, lines: list[str]) -> None:
        """Replace what is shown by `lines` and stop following the source (a failure's tail)."""
        self._seen = 1 << 62
        self.clear()
        self.write_lines([shown_line(line) for line in lines])
        # The pane may shrink once the failure is shown above it: end on the last line after.
        self.call_after_refresh(self.scroll_end, animate=False)


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

    def __init__(self, source: LogSource) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        with Vertical(id="log-box"):
            yield Label(
                f"vLLM log: {visible(self.source.log_path)}  (l, ctrl+l or Esc closes)",
                id="log-where",
                markup=False,
            )
            yield LogPane(self.source, id="log-pane")

    def action_close(self) -> None:
        self.dismiss(None)
