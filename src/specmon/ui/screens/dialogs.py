"""The dialogs of the chat and dashboard screens: sampling settings, a marker's label, the table
of all answers, the address of one more server to watch, and the model to chat with among those
the server lists."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from specmon.core.verdict import request_verdict
from specmon.core.views import RequestRow
from specmon.ui.conversation import ChatSettings, parse_settings
from specmon.ui.formatting import (
    DASH,
    fmt,
    fmt_acceptance,
    fmt_frac_pct,
    visible,
    visible_line,
)
from specmon.ui.port import SessionPort, server_address
from specmon.ui.widgets.diagnosis_panel import SAVED_COLUMN, saved_by_request, saved_cell
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.ordered_input import OrderedInput


def blank(value: float | int | None) -> str:
    return "" if value is None else str(value)


class SettingsScreen(ModalScreen[ChatSettings | None]):
    """Temperature, top-p and max tokens; blank means the server's default."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "cancel")]

    def __init__(self, settings: ChatSettings) -> None:
        super().__init__()
        self.settings = settings

    def compose(self) -> ComposeResult:
        s = self.settings
        with Vertical(id="settings-box", classes="dialog-box"):
            yield Label("Sampling (blank = server default)")
            yield Label("temperature")
            yield OrderedInput(blank(s.temperature), id="temperature")
            yield Label("top-p")
            yield OrderedInput(blank(s.top_p), id="top-p")
            yield Label("max tokens")
            yield OrderedInput(blank(s.max_tokens), id="max-tokens")
            yield Static("", id="settings-error", markup=False)
            with Horizontal(id="settings-buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#save")
    @on(Input.Submitted)
    def _save(self) -> None:
        result = parse_settings(
            self.query_one("#temperature", Input).value,
            self.query_one("#top-p", Input).value,
            self.query_one("#max-tokens", Input).value,
        )
        if isinstance(result, str):
            self.query_one("#settings-error", Static).update(Text(result))
            return
        self.dismiss(result)


class MarkerScreen(ModalScreen[str | None]):
    """Asks for a marker's label (Enter adds it, Esc cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="marker-box", classes="dialog-box"):
            yield Label("Marker label (Enter adds it, Esc cancels)")
            yield OrderedInput(placeholder="e.g. slow after the 3rd answer", id="marker-label")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#marker-label")
    def _add(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or "marker")


def row_cells(row: RequestRow) -> tuple[str, ...]:
    """One line of the answers table: id, tokens, tok/s, TTFT, AL (source), accept, badge (the
    request's verdict, core.verdict)."""
    a = row.acceptance
    verdict = request_verdict(row)
    return (
        row.request_id,
        fmt(row.completion_tokens, "d"),
        fmt(row.decode_tok_s, ".1f"),
        fmt(None if row.ttft_s is None else row.ttft_s * 1000, ".0f", " ms"),
        fmt_acceptance(a),
        fmt_frac_pct(a.draft_acceptance_rate if a is not None else None),
        DASH if verdict.kind == "unjudged" else verdict.kind,
    )


ANSWER_COLUMNS = ("id", "tokens", "tok/s", "TTFT", "AL (source)", "accept", "badge")


ANSWER_FILTERS = ("all", "flagged", "failed")
"""The answers table's filters, in the order its key (f) cycles them: every answer, the flagged
ones (transition, vanilla-speed), the failed ones."""

EMPTY_ROW = "-none-"
"""The key of the one row of dashes an empty table shows."""


def answer_shown(row: RequestRow, which: str) -> bool:
    """Whether the answers table's filter `which` (ANSWER_FILTERS) shows `row`."""
    if which == "flagged":
        return request_verdict(row).flagged
    if which == "failed":
        return row.outcome == "failed"
    return True


def answers_title(which: str, shown: int, total: int) -> str:
    """The line above the answers table: the filter in use and how many rows it shows (short
    enough for the dialog at 80 columns)."""
    if which == "all":
        return f"All answers: {total}  (f filters · Esc closes)"
    return f"{which.capitalize()} answers only: {shown} of {total}  (f filters · Esc closes)"


class AnswersTable(DataTable[Text]):
    """The answers table: a row cursor; Home and End go to the first and the last answer (a
    table of answers is read by rows, not scrolled sideways)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_top", "first answer", show=False),
        Binding("end", "scroll_bottom", "last answer", show=False),
    ]


class AnswersScreen(ModalScreen[None]):
    """Every answer of the session (the session's rows), refreshed once a second in place: the
    cursor and the scroll position stay where the user put them (PgDn, End), and a cursor on the
    last row follows the newest answer (like `tail -f`). f cycles the filter: all, flagged,
    failed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("f", "cycle_filter", "filter: all/flagged/failed"),
        Binding("f4", "close", "close", show=False),
    ]

    def __init__(self, port: SessionPort) -> None:
        super().__init__()
        self.port = port
        self.filter = ANSWER_FILTERS[0]
        self._shown: dict[str, tuple[str, ...]] = {}
        """The rows on screen by key, in order: their cells as drawn."""

    def compose(self) -> ComposeResult:
        with Vertical(id="answers-box", classes="dialog-box"):
            yield Label(answers_title(self.filter, 0, 0), id="answers-title", markup=False)
            yield AnswersTable(id="answers-table", zebra_stripes=True, cursor_type="row")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#answers-table", DataTable)
        for name in (*ANSWER_COLUMNS, SAVED_COLUMN):
            table.add_column(name, key=name)
        self.refresh_rows()
        self.set_interval(1.0, self.refresh_rows)

    def _rows(self) -> tuple[dict[str, tuple[str, ...]], int]:
        """The rows the filter shows, by key (source and id: one id may repeat across the
        watched servers), and how many answers there are in all."""
        view = self.port.view()
        if view is None:
            return {}, 0
        saved = saved_by_request(view)
        rows: dict[str, tuple[str, ...]] = {}
        for r in view.rows:
            if answer_shown(r, self.filter):
                key = f"{r.source}\x00{r.request_id}"
                while key in rows:  # the same request twice: both shown
                    key += "\x00"
                rows[key] = (*row_cells(r), saved_cell(saved.get(r.request_id)))
        return rows, len(view.rows)

    def refresh_rows(self) -> None:
        """Bring the table up to date without moving what the user looks at: changed cells are
        updated in place, new answers appended; only when rows went away (or the filter
        changed) is the table rebuilt, with the cursor put back on its row and the scroll
        position kept. A cursor on the last row moves to the new last row."""
        rows, total = self._rows()
        self.query_one("#answers-title", Label).update(answers_title(self.filter, len(rows), total))
        if not rows:
            rows = {EMPTY_ROW: tuple(DASH for _ in (*ANSWER_COLUMNS, SAVED_COLUMN))}
        shown = self._shown
        if rows == shown:
            return
        table: DataTable[Text] = self.query_one("#answers-table", DataTable)
        at_end = table.row_count > 0 and table.cursor_row >= table.row_count - 1
        old_keys, new_keys = list(shown), list(rows)
        if new_keys[: len(old_keys)] == old_keys:
            columns = (*ANSWER_COLUMNS, SAVED_COLUMN)
            for key in old_keys:
                before, after = shown[key], rows[key]
                for column, old, new in zip(columns, before, after, strict=True):
                    if old != new:
                        table.update_cell(key, column, Text(new))
            for key in new_keys[len(old_keys) :]:
                table.add_row(*(Text(c) for c in rows[key]), key=key)
        else:
            keep = None
            if table.row_count and 0 <= table.cursor_row < len(old_keys):
                keep = old_keys[table.cursor_row]
            scroll_y = table.scroll_y
            table.clear()
            for key, cells in rows.items():
                table.add_row(*(Text(c) for c in cells), key=key)
            if keep in rows:
                table.move_cursor(row=new_keys.index(keep), animate=False, scroll=False)
            table.call_after_refresh(table.scroll_to, y=scroll_y, animate=False)
        self._shown = rows
        if at_end and len(new_keys) > len(old_keys):
            table.move_cursor(row=table.row_count - 1, animate=False)

    def action_cycle_filter(self) -> None:
        """f: all → flagged → failed → all; the title says which."""
        i = ANSWER_FILTERS.index(self.filter)
        self.filter = ANSWER_FILTERS[(i + 1) % len(ANSWER_FILTERS)]
        self.refresh_rows()

    def action_close(self) -> None:
        self.dismiss(None)


def check_server_url(text: str) -> str:
    """The base URL of a server address typed by the user; ValueError with a one-line reason when
    it is empty or not an http(s) server address (host:port alone means http://host:port)."""
    if not text.strip():
        raise ValueError("type a server address, e.g. http://gpu-box:8000")
    return server_address(text)


class AddServerScreen(ModalScreen[tuple[str, str | None] | None]):
    """Asks for a server address and, optionally, an API key for it alone; dismisses with
    (base URL, key or None), or None (escape). A bad address is said in the dialog, which stays
    open. The key is typed masked, and goes to that server only (the command line's key does
    not go to a server added here)."""

    DEFAULT_CSS = """
    #add-box {
        width: 70;
        height: auto;
    }
    #add-error {
        color: $error;
        height: auto;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="add-box", classes="dialog-box"):
            yield Label("Watch one more server: http(s) address (Enter adds, Esc cancels)")
            yield OrderedInput(placeholder="http://gpu-box:8000", id="add-url")
            yield OrderedInput(
                placeholder="API key for this server only (optional)", password=True, id="add-key"
            )
            yield Static("", id="add-error", markup=False)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#add-url")
    @on(Input.Submitted, "#add-key")
    def _add(self, event: Input.Submitted) -> None:
        try:
            url = check_server_url(self.query_one("#add-url", Input).value)
        except ValueError as exc:
            self.query_one("#add-error", Static).update(Text(visible(str(exc))))
            return
        key = self.query_one("#add-key", Input).value.strip()
        self.dismiss((url, key or None))


MAX_MODELS_SHOWN = 1000
"""The model dialog lists at most this many of the server's models (a server may list
thousands); a line says how many were left out."""


class ModelScreen(ModalScreen[str | None]):
    """The model to ask next, among those the server lists (the chat screen's ctrl+t): Enter
    picks the highlighted one, Esc cancels. Dismissed with the name exactly as the server gave
    it (shown with control characters made visible), or None."""

    DEFAULT_CSS = """
    ModelScreen { align: center middle; }
    ModelScreen #model-box {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: round $primary; padding: 0 1; background: $surface;
    }
    ModelScreen #model-list { height: auto; max-height: 20; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "cancel")]

    def __init__(self, models: tuple[str, ...], current: str | None) -> None:
        super().__init__()
        self.models = models[:MAX_MODELS_SHOWN]
        self.left_out = len(models) - len(self.models)
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="model-box"):
            yield Label("Model for the next question (Enter picks, Esc cancels)")
            options = [
                Option(Text(("● " if m == self.current else "  ") + visible_line(m)))
                for m in self.models
            ]
            yield OptionList(*options, id="model-list")
            if self.left_out:
                yield Label(
                    f"{self.left_out} more not shown (the first {MAX_MODELS_SHOWN} are)",
                    markup=False,
                )

    def on_mount(self) -> None:
        option_list = self.query_one("#model-list", OptionList)
        if self.current in self.models:
            option_list.highlighted = self.models.index(self.current)
        option_list.focus()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected, "#model-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.models[event.option_index])
