"""The hosted vLLM server's own log (or the demo's simulator's), shown literally: a bounded pane
(the startup view shows it, and screens/log.py over the chat or the dashboard, toggled with `l`
or ctrl+l).

Log text is untrusted: every control character becomes a visible stand-in (`formatting.visible`, so
an ANSI escape shows as `␛[31m` and cannot act on the terminal), and Textual's `Log` widget never
parses markup, so `[bold]` or `[@click=...]` stay text. The pane keeps at most `LOG_PANE_LINES`
lines and pulls new ones from its source at `PULL_HZ` (never per line from the log thread).
"""

from __future__ import annotations

from textual.widgets import Log

from specmon.ui.formatting import visible
from specmon.ui.host import LogSource

LOG_PANE_LINES = 1000
"""The most lines the pane keeps (older ones scroll away)."""
PULL_HZ = 4.0
"""How often the pane asks its source for new lines."""


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
        title: str = "vLLM log",
        id: str | None = None,
    ) -> None:
        super().__init__(highlight=False, max_lines=max_lines, auto_scroll=True, id=id)
        self.source = source
        self._seen = 0
        self.border_title = title

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
