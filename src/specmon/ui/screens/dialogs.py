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
            yield Input(blank(s.temperature), id="temperature")
            yield Label("top-p")
            yield Input(blank(s.top_p), id="top-p")
            yield Label("max tokens")
            yield Input(blank(s.max_tokens), id="max-tokens")
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
            yield Input(placeholder="e.g. slow after the 3rd answer", id="marker-label")

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


class AnswersScreen(ModalScreen[None]):
    """Every answer of the session (the session's rows), refreshed once a second."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("f4", "close", "close", show=False),
    ]

    def __init__(self, port: SessionPort) -> None:
        super().__init__()
        self.port = port
        self._shown: tuple[tuple[str, ...], ...] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="answers-box", classes="dialog-box"):
            yield Label("All answers of this session (Esc closes)")
            table: DataTable[str] = DataTable(id="answers-table", zebra_stripes=True)
            yield table

    def on_mount(self) -> None:
        table = self.query_one("#answers-table", DataTable)
        table.add_columns(*ANSWER_COLUMNS, SAVED_COLUMN)
        self.refresh_rows()
        self.set_interval(1.0, self.refresh_rows)

    def refresh_rows(self) -> None:
        view = self.port.view()
        saved = saved_by_request(view)
        rows = (
            tuple((*row_cells(r), saved_cell(saved.get(r.request_id))) for r in view.rows)
            if view is not None
            else ()
        )
        if rows == self._shown:
            return
        self._shown = rows
        table = self.query_one("#answers-table", DataTable)
        table.clear()
        for cells in rows:
            table.add_row(*(Text(c) for c in cells))
        if not rows:
            table.add_row(*(Text(DASH) for _ in (*ANSWER_COLUMNS, SAVED_COLUMN)))

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
            yield Label("Watch one more server (http(s) address, Enter adds, Escape cancels):")
            yield Input(placeholder="http://gpu-box:8000", id="add-url")
            yield Input(
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
