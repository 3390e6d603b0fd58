"""The footer of every screen: Textual's Footer, fitted to the width by whole keys.

Textual's footer draws every key in a row and crops the row at the edge, so an 80-column
terminal showed half a key ("f3 why (badge") and never the keys after it. This one never cuts a
key: the help and quit keys always stay (first in the row), the others stay in the order the
screen lists them (most needed first) while they fit, and when any is left out the row ends in
"…" (the one truncation rule, `core.display_text.shorten`); F1's help screen and the command
palette list every key.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel  # not exported by textual.widgets

from specmon.ui.formatting import ELLIPSIS, cell_width

KEPT_ACTIONS = frozenset({"help", "app.help", "quit", "app.quit"})
"""Keys never left out of a footer: help (F1) and quit."""


class KeysFooter(Footer):
    """A footer that leaves out whole keys, lowest priority first, where they do not fit."""

    DEFAULT_CSS = """
    KeysFooter FooterLabel.-more { margin: 0 1 0 0; }
    """

    def compose(self) -> ComposeResult:
        yield from super().compose()
        more = FooterLabel(ELLIPSIS, classes="-more")
        more.display = False
        yield more

    async def recompose(self) -> None:
        await super().recompose()
        kept = [k for k in self.query_children(FooterKey) if k.action in KEPT_ACTIONS]
        for key in reversed(kept):  # first in the row, whatever the focused widget's keys are
            self.move_child(key, before=0)
        self.fit_keys()

    def on_resize(self) -> None:
        self.fit_keys()

    def _watch_compact(self, compact: bool) -> None:
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        """Show the keys that fit in the footer's width: help and quit, then the others in
        order while they fit, and "…" after them when any was left out."""
        width = self.size.width
        if not width:
            return
        keys = [k for k in self.query_children(FooterKey) if not k.has_class("-command-palette")]
        palette = [k for k in self.query_children(FooterKey) if k.has_class("-command-palette")]
        mores = list(self.query_children(FooterLabel).filter(".-more"))
        room = width - sum(_width(k) for k in palette)
        kept = [k for k in keys if k.action in KEPT_ACTIONS]
        room -= sum(_width(k) for k in kept)
        others = [k for k in keys if k.action not in KEPT_ACTIONS]
        shown = set(kept)
        if sum(_width(k) for k in others) <= room:
            shown.update(others)
        else:
            room -= cell_width(ELLIPSIS) + 1  # the "…" after the last key shown
            for key in others:
                if _width(key) > room:
                    break  # lower priority than one left out: left out too
                room -= _width(key)
                shown.add(key)
        for key in keys:
            key.display = key in shown
        for more in mores:
            more.display = len(shown) < len(keys)


def _width(key: FooterKey) -> int:
    """The cells a key takes in the row: its text and its margins."""
    return key.render().cell_len + key.styles.gutter.width + key.styles.margin.width
