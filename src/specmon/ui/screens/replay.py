"""The replay screen of `specmon replay FILE` on a terminal: a recorded session shown again.

The dashboard's side panel (the same `SidePanel` as the chat and `specmon watch`) and the table of
answers (the same cells as the answers dialog, `row_cells`), fed from the view at the play head
(`ReplayPort`), the timeline under them, and a header that says RECORDED (and SIMULATED). Keys:
space pauses and resumes, `+`/`-` change the speed (x0.5 to x64), left/right seek 10 s (with
shift 60 s), home/end, `n`/`N` jump to the next/previous flag or marker; a click on the timeline
seeks there; Esc hides the reader's notice (skipped lines, where the reading stopped). Nothing
here does I/O: the recording was read by the cli before the app started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Label, Static

from specmon.core.views import RequestRow, SessionView
from specmon.ui.answer_numbers import AnswerNumbers, numbers_from_row
from specmon.ui.formatting import visible
from specmon.ui.replay_port import ReplayPort
from specmon.ui.screens.dialogs import ANSWER_COLUMNS, row_cells
from specmon.ui.styles import theme_styles
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.side_panel import SidePanel, panel_summary, toggle_open
from specmon.ui.widgets.timeline import Timeline, clock_text, speed_text

if TYPE_CHECKING:
    from specmon.core.replay_timeline import ReplayPosition

TICK_HZ = 10.0
"""The play head, the timeline and the table move this often."""
PANEL_EVERY = 2
"""The side panel is redrawn every this many ticks (5 Hz; the live panel draws at 4 Hz)."""
REPLAY_COLUMNS = ("ended", *ANSWER_COLUMNS)
DROP_ORDER = ("tokens", "accept", "TTFT", "ended", "id")
"""Where the answers table is too narrow, the columns left out first to last; tok/s, AL and
the badge always stay."""
WIDE_WIDTH = 120
"""From this many columns the panel sits beside the answers; below, it is one summary line and
F9 shows it whole in place of the answers."""


def kept_columns(rows: tuple[tuple[str, ...], ...], width: int) -> tuple[int, ...]:
    """The indices (in REPLAY_COLUMNS) of the columns that fit `width` characters, each as
    wide as its longest cell or title plus the table's padding, leaving out DROP_ORDER's first
    until they fit (the last three always stay)."""
    widths = [
        max([len(title), *(len(r[i]) for r in rows if i < len(r))]) + 2
        for i, title in enumerate(REPLAY_COLUMNS)
    ]
    kept = list(range(len(REPLAY_COLUMNS)))
    for title in DROP_ORDER:
        if sum(widths[i] for i in kept) <= width:
            break
        kept.remove(REPLAY_COLUMNS.index(title))
    return tuple(kept)


def table_rows(view: SessionView | None, start: float) -> tuple[tuple[str, ...], ...]:
    """The answers table at the play head: finished requests (with the recorded time they ended,
    from the recording's start; each badge as the session state settled it, the verdict every
    screen counts), then those still running."""
    if view is None:
        return ()
    out: list[tuple[str, ...]] = []
    for row in (*view.rows, *view.in_flight):
        ended = "…" if row.t_end is None else clock_text(row.t_end - start)
        out.append((ended, *row_cells(row)))
    return tuple(out)


def last_answer(view: SessionView | None) -> AnswerNumbers | None:
    """The numbers of the last finished answer at the play head (the panel's "this answer")."""
    if view is None or not view.rows:
        return None
    row: RequestRow = view.rows[-1]
    return numbers_from_row(row, view.gpu)


class ReplayScreen(Screen[None]):
    """A recording played back: panel, answers, timeline; see the module doc for the keys."""

    DEFAULT_CSS = """
    ReplayScreen { layout: vertical; }
    #replay-header { dock: top; height: 1; background: $primary-background; }
    #replay-label { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #replay-badge {
        width: auto; height: 1; padding: 0 1; background: $warning; color: $background;
        text-style: bold;
    }
    #replay-notice { height: auto; color: $warning; padding: 0 1; }
    #replay-main { height: 1fr; }
    #replay-left { width: 1fr; height: 1fr; }
    #replay-answers { height: 1fr; }
    #replay-table-title { color: $text-muted; padding: 0 1; }
    #replay-panel { width: 52; height: 1fr; border-left: vkey $primary-background; }
    #timeline { border-top: hkey $primary-background; height: 5; padding: 0 1; }
    """

    # Textual declares these `ClassVar[...] | None`, which mypy reads as an instance variable.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-narrow"),
        (WIDE_WIDTH, "-wide"),
    ]

    BINDINGS: ClassVar[list[BindingType]] = [
        # Help and quit first, as on every screen (the footer never leaves them out).
        Binding("f1", "app.help", "help"),
        Binding("ctrl+q", "app.quit", "quit", priority=True),
        Binding("space", "toggle_pause", "play/pause", priority=True),
        Binding("plus,equals_sign", "faster", "faster", priority=True),
        Binding("minus", "slower", "slower", priority=True),
        Binding("left", "seek(-10)", "-10 s", priority=True),
        Binding("right", "seek(10)", "+10 s", priority=True),
        Binding("shift+left", "seek(-60)", "-60 s", show=False, priority=True),
        Binding("shift+right", "seek(60)", "+60 s", show=False, priority=True),
        Binding("home", "home", "start", show=False, priority=True),
        Binding("end", "end", "end", show=False, priority=True),
        Binding("n", "jump(1)", "next flag", priority=True),
        Binding("N", "jump(-1)", "prev flag", priority=True),
        Binding("escape", "dismiss_notice", "dismiss notice", show=False),
        Binding("f9", "toggle_panel", "panel"),
        Binding("q", "app.quit", "quit", show=False),
    ]

    def __init__(self, port: ReplayPort) -> None:
        super().__init__()
        self.port = port
        self._ticks = 0
        self._rows_shown: tuple[tuple[str, ...], ...] | None = None
        self.position: ReplayPosition | None = None
        self._columns: tuple[int, ...] = ()
        """The answers table's columns shown (indices in REPLAY_COLUMNS)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="replay-header"):
            yield Static(Text(visible(self.port.label)), id="replay-label")
            badge = Static("SIMULATED", id="replay-badge", markup=False)
            badge.display = self.port.simulated
            yield badge
        notice = Static(
            Text(visible("  ".join(self.port.notices))), id="replay-notice", markup=False
        )
        notice.display = bool(self.port.notices)
        yield notice
        with Horizontal(id="replay-main"):
            with Vertical(id="replay-left"):
                yield Label("answers at the play head", id="replay-table-title")
                yield Static("", id="replay-summary", markup=False)
                table: DataTable[Text] = DataTable(id="replay-answers", zebra_stripes=True)
                yield table
            yield SidePanel(id="replay-panel")
        yield Timeline(self.port.timeline, id="timeline")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_interval(1 / TICK_HZ, self.tick)
        self.refresh_all()

    # ------------------------------------------------------------ drawing

    def tick(self) -> None:
        """One frame: move the play head; the panel every PANEL_EVERY frames."""
        self._ticks += 1
        self.refresh_all(panel=self._ticks % PANEL_EVERY == 0)

    def refresh_all(self, *, panel: bool = True) -> None:
        """Fold up to the play head and redraw the timeline, the table and (panel) the panel."""
        port = self.port
        view = port.view()
        position = port.position()
        self.position = position
        self.query_one(Timeline).show(position)
        self._show_rows(view, position.origin)
        if panel:
            side = self.query_one(SidePanel)
            # The graphs: the replayed state's own history, up to the play head.
            side.show(view, last_answer(view), now=position.t)
            summary = panel_summary(
                view,
                last_answer(view),
                styles=theme_styles(self.app.theme_variables),
            )
            self.query_one("#replay-summary", Static).update(summary)

    def _show_rows(self, view: SessionView, start: float) -> None:
        rows = table_rows(view, start)
        table = self.query_one("#replay-answers", DataTable)
        # Room for the vertical scrollbar always: the columns do not change when it appears.
        width = max(0, table.size.width - table.styles.scrollbar_size_vertical)
        columns = kept_columns(rows, width) if width else tuple(range(len(REPLAY_COLUMNS)))
        if rows == self._rows_shown and columns == self._columns:
            return
        self._rows_shown = rows
        if columns != self._columns:
            self._columns = columns
            table.clear(columns=True)
            table.add_columns(*(REPLAY_COLUMNS[i] for i in columns))
        table.clear()
        for cells in rows:
            table.add_row(*(Text(visible(cells[i])) for i in columns))
        if rows:
            table.move_cursor(row=len(rows) - 1, animate=False)

    def on_resize(self) -> None:
        self.call_after_refresh(self.refresh_all)  # the answers' columns for the new width

    def action_toggle_panel(self) -> None:
        """F9: below WIDE_WIDTH, the whole panel in place of the answers (focused: the arrows
        scroll it), and back; beside the answers, the focus to the panel and back."""
        toggle_open(
            self.query_one(SidePanel), "-narrow", self.query_one("#replay-answers", DataTable)
        )

    def action_dismiss_notice(self) -> None:
        """Esc: hide the reader's notice (it is printed again on stderr after the app)."""
        self.query_one("#replay-notice").display = False

    def _say(self, text: str) -> None:
        self.query_one(SidePanel).note(text)

    # ------------------------------------------------------------ keys

    def action_toggle_pause(self) -> None:
        playing = self.port.toggle_pause()
        self._say("playing" if playing else "paused")
        self.refresh_all()

    def action_faster(self) -> None:
        self._say(f"speed {speed_text(self.port.faster())}")
        self.refresh_all()

    def action_slower(self) -> None:
        self._say(f"speed {speed_text(self.port.slower())}")
        self.refresh_all()

    def action_seek(self, seconds: float) -> None:
        self.port.seek_by(float(seconds))
        self.refresh_all()

    def action_home(self) -> None:
        self.port.seek(self.port.timeline.start)
        self.refresh_all()

    def action_end(self) -> None:
        self.port.seek(self.port.timeline.end)
        self.refresh_all()

    def action_jump(self, direction: int) -> None:
        moved = self.port.jump(int(direction))
        if moved is None:
            self._say("no further flag or marker " + ("ahead" if direction > 0 else "before"))
            return
        here = self.port.labels_here()
        self._say(f"at {clock_text(moved.elapsed_s)}: " + "; ".join(here))
        self.refresh_all()

    @on(Timeline.Seek)
    def _clicked(self, event: Timeline.Seek) -> None:
        self.port.seek(event.t)
        self.refresh_all()
