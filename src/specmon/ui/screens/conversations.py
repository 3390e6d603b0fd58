"""The list of saved conversations (`specmon chat --resume`): newest first, a search field that
filters as you type (title, model, prompts and answers), Enter reopens the highlighted one, Esc
leaves. The store is read in a worker thread through the `search` callable; a failure shows as
one line on the screen.

`ConversationsApp` hosts the screen on its own, so the cli can ask which conversation to reopen
before the chat starts; the screen itself works in any app (its result is the chosen id, or None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from specmon.core.chat_record import ConversationSummary
from specmon.ui.formatting import visible
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.ordered_input import OrderedInput

Search = Callable[[str], list[ConversationSummary]]
"""Returns the conversations matching a text (blank: all, newest first); may raise an error
whose message is one line."""

COLUMNS = ("id", "title", "model", "turns", "updated")


def _when(stamp: str) -> str:
    return stamp.replace("T", " ").removesuffix("+00:00")[:16] + (" UTC" if stamp else "")


class ConversationsScreen(Screen[int | None]):
    """Saved conversations, searchable; dismissed with the chosen id (None: none chosen)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "back"),
        Binding("down", "cursor(1)", "next", show=False),
        Binding("up", "cursor(-1)", "previous", show=False),
    ]
    DEFAULT_CSS = """
    ConversationsScreen #conversations-search { margin: 0 0 1 0; }
    ConversationsScreen #conversations-note { height: auto; color: $text-muted; }
    ConversationsScreen #conversations-note.-failed { color: $error; }
    """

    def __init__(self, search: Search) -> None:
        super().__init__()
        self.search = search
        self.shown: list[ConversationSummary] = []
        self._asked = 0
        self._shown_asked = 0
        """The search whose result the list shows (`_asked`: the newest one asked)."""
        self._choose_when_shown = False
        self._text: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="conversations-box"):
            yield Static("Saved conversations (type to search, Enter reopens, Esc leaves)")
            yield OrderedInput(placeholder="search", id="conversations-search")
            table: DataTable[Text] = DataTable(id="conversations-table", cursor_type="row")
            yield table
            yield Static("loading…", id="conversations-note", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#conversations-table", DataTable).add_columns(*COLUMNS)
        self.query_one("#conversations-search", Input).focus()
        self.load("")

    @on(Input.Changed, "#conversations-search")
    def _typed(self, event: Input.Changed) -> None:
        if event.value.strip() != self._text:  # not again for the same text (the list and
            self.load(event.value)  # its cursor would be reset under the user)

    def load(self, text: str) -> None:
        self._text = text.strip()
        self._asked += 1
        self._search(text, self._asked)

    @work(thread=True, exclusive=True, group="conversations-search")
    def _search(self, text: str, asked: int) -> None:
        try:
            found: list[ConversationSummary] | str = self.search(text)
        except Exception as exc:  # one line on screen whatever the store raised
            found = " ".join(str(exc).split()) or type(exc).__name__
        self.app.call_from_thread(self._show, found, text, asked)

    def _show(self, found: list[ConversationSummary] | str, text: str, asked: int) -> None:
        if asked != self._asked:  # an older search finished after a newer one started
            return
        self._shown_asked = asked
        chosen_now, self._choose_when_shown = self._choose_when_shown, False
        note = self.query_one("#conversations-note", Static)
        table = self.query_one("#conversations-table", DataTable)
        table.clear()
        if isinstance(found, str):
            self.shown = []
            note.update(Text(visible(f"cannot read the saved conversations: {found}")))
            note.add_class("-failed")
            return
        note.remove_class("-failed")
        self.shown = found
        for c in found:
            table.add_row(
                Text(str(c.id)),
                Text(visible(c.title)),
                Text(visible(c.model or "—")),
                Text(str(c.turns)),
                Text(_when(c.updated_at)),
                key=str(c.id),
            )
        if found:
            note.update(Text(f"{len(found)} conversation{'s' if len(found) != 1 else ''}"))
        elif text.strip():
            note.update(Text(visible(f"no saved conversation contains {text.strip()!r}")))
        else:
            note.update(Text("no saved conversations yet"))
        if chosen_now:  # Enter was typed before this search's result came
            self.choose()

    def action_cursor(self, step: int) -> None:
        table = self.query_one("#conversations-table", DataTable)
        if self.shown:
            table.move_cursor(row=max(0, min(len(self.shown) - 1, table.cursor_row + step)))

    @on(Input.Submitted, "#conversations-search")
    def _submitted(self) -> None:
        if self._shown_asked != self._asked:  # Enter typed with the search text: the row is
            self._choose_when_shown = True  # chosen from that search's result, not the old list
            return
        self.choose()

    @on(DataTable.RowSelected, "#conversations-table")
    def _selected(self) -> None:
        self.choose()

    def choose(self) -> None:
        """Reopen the highlighted conversation (nothing when the list is empty)."""
        table = self.query_one("#conversations-table", DataTable)
        if self.shown and 0 <= table.cursor_row < len(self.shown):
            self.dismiss(self.shown[table.cursor_row].id)

    def action_leave(self) -> None:
        self.dismiss(None)


class ConversationsApp(App[int | None]):
    """Only the list: exits with the chosen conversation's id (None: Esc)."""

    TITLE = "specmon chat --resume"

    def __init__(self, search: Search) -> None:
        super().__init__()
        self.search = search

    def on_mount(self) -> None:
        self.push_screen(ConversationsScreen(self.search), self.exit)
