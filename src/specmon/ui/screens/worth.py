"""What each draft position is worth (key w, a modal), from the per-position acceptance over the
window and since start (`core/position_worth.py`): for every n_spec up to the current one, the
expected tokens per step and the share of the accepted tokens it keeps; per position, its rate
and its share of the accepted tokens; and the trim hint when the last positions rarely accept.
The side panel shows the same hint as one line (`widgets/side_panel.hint_line`).

The text is built by a pure function (`worth_text`), tested without an app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from specmon.core.position_worth import (
    PositionWorth,
    no_hint_reason,
    server_position_worth,
)
from specmon.core.views import SessionView
from specmon.ui.formatting import DASH, fmt_field
from specmon.ui.styles import CONSOLE_STYLES, Styles, theme_styles
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.side_panel import chosen_hint

REFRESH_S = 1.0


def _pct(value: float | None, width: int) -> str:
    return fmt_field(None if value is None else value * 100, ".1f", width - 1) + (
        "%" if value is not None else " "
    )


def _table(worth: PositionWorth | None, other: PositionWorth | None, k: int) -> Text:
    """n_spec rows 0..k: expected tokens per step and kept share, window and since start."""
    out = Text()
    out.append(
        f"{'n_spec':>6}  {'tokens/step':>11} {'kept':>7}   {'tokens/step':>11} {'kept':>7}\n",
        style="bold",
    )
    out.append(f"{'':>6}  {'window':>19}   {'since start':>19}\n", style="dim")
    for n in range(k + 1):
        cells = []
        for w in (worth, other):
            if w is None or n > w.n_spec:
                cells.append(f"{DASH:>11} {DASH:>7}")
                continue
            kept = w.kept_share[n] if w.kept_share is not None else None
            cells.append(f"{fmt_field(w.expected_tokens[n], '.2f', 11)} {_pct(kept, 7)}")
        out.append(f"{n:>6}  {cells[0]}   {cells[1]}\n")
    return out


def _positions(worth: PositionWorth | None, other: PositionWorth | None, k: int) -> Text:
    """Per position (1-based): rate and share of the accepted tokens, window and since start."""
    out = Text()
    out.append(f"{'pos':>6}  {'rate':>7} {'share':>7}   {'rate':>7} {'share':>7}\n", style="bold")
    for i in range(k):
        cells = []
        for w in (worth, other):
            if w is None or i >= w.n_spec:
                cells.append(f"{DASH:>7} {DASH:>7}")
                continue
            share = w.share_of_accepted[i] if w.share_of_accepted is not None else None
            cells.append(f"{_pct(w.rates[i], 7)} {_pct(share, 7)}")
        out.append(f"{i + 1:>6}  {cells[0]}   {cells[1]}\n")
    return out


def worth_text(view: SessionView | None, *, styles: Styles = CONSOLE_STYLES) -> Text:
    """The modal's text for the first server of `view`."""
    server = view.servers[0] if view is not None and view.servers else None
    if server is None:
        return Text("No server numbers yet.", style="italic")
    worth = server_position_worth(server)
    k = max((w.n_spec for w in (worth.window, worth.lifetime) if w is not None), default=0)
    if k == 0:
        return Text(
            "No per-position acceptance: the server reports no speculative steps yet "
            f"(or runs without speculation). Every number here would be {DASH}.",
            style="italic",
        )
    out = Text()
    out.append(
        "Expected tokens per step and share of the accepted tokens kept, for every "
        "n_spec up to the current one\n",
        style="bold underline",
    )
    out.append_text(_table(worth.window, worth.lifetime, k))
    out.append(
        "\nEach position's acceptance rate and its share of the accepted tokens\n",
        style="bold underline",
    )
    out.append_text(_positions(worth.window, worth.lifetime, k))
    found = chosen_hint(worth)
    out.append("\n")
    if found is None:
        out.append(no_hint_reason(worth), style="dim")
    else:
        hint, which = found
        out.append(f"{hint.text} ({which}).", style=f"bold {styles.warning}")
    out.append(
        "\n\nAssumes the first n positions accept as they do now when fewer are drafted; the "
        "verify cost, which grows with n_spec, is not in these numbers.",
        style="dim",
    )
    return out


class WorthScreen(ModalScreen[None]):
    """What each draft position is worth, refreshed once a second; Esc (or w) closes."""

    DEFAULT_CSS = """
    #worth-box { width: 72; height: 90%; }
    #worth-scroll { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("w", "close", "close", show=False),
        Binding("f8", "close", "close", show=False),
    ]

    def __init__(self, read_view: Callable[[], SessionView | None]) -> None:
        super().__init__()
        self._read_view = read_view
        self._shown = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="worth-box", classes="dialog-box"):
            yield Label("What each draft position is worth (Esc closes)")
            with VerticalScroll(id="worth-scroll"):
                yield Static("", id="worth-body", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.refresh_numbers()
        self.set_interval(REFRESH_S, self.refresh_numbers)

    def refresh_numbers(self) -> None:
        text = worth_text(self._read_view(), styles=theme_styles(self.app.theme_variables))
        if text.plain != self._shown:
            self._shown = text.plain
            self.query_one("#worth-body", Static).update(text)

    def action_close(self) -> None:
        self.dismiss(None)
