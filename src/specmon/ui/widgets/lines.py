"""Leaf widgets that show lines rendered once per width (the line API: `render_line` returns a
kept line, so a reflow or a repaint renders nothing again): `SettledLines`, the settled pieces
of one answer, and `TextLines`, one Rich Text (the heat view, the help)."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from specmon.ui.widgets.markdown_lines import Piece, render_lines, render_text_lines


class SettledLines(Widget):
    """All the settled text of one answer in ONE leaf widget: a list of pieces, each rendered to
    lines once per width and kept; `render_line` returns a kept line. Adding a piece appends
    its lines (no widget is mounted, no CSS applied, nothing else re-rendered); the final render
    replaces the pieces from one on. A width change renders every piece again, once."""

    DEFAULT_CSS = """
    SettledLines { height: auto; }
    """

    def __init__(self, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.pieces: list[Piece] = []
        """The pieces shown, in order (control characters already made visible)."""
        self._piece_lines: list[list[Strip]] = []
        self._width = 0
        self._lines: list[Strip] = []
        self.renders = 0
        """Pieces rendered by Rich in the UI thread (first showing at a width, or a resize)."""

    def _render_all(self, width: int) -> None:
        if width != self._width:
            self._width = width
            self._piece_lines = [render_lines(piece, width) for piece in self.pieces]
            self.renders += len(self.pieces)
            self._lines = [line for lines in self._piece_lines for line in lines]

    def add(self, piece: Piece, lines: tuple[int, list[Strip]] | None = None) -> None:
        """Append a piece; `lines` (width, lines) is a rendering made in the worker thread."""
        self.replace_from(len(self.pieces), piece, lines)

    def replace_from(
        self, index: int, piece: Piece | None, lines: tuple[int, list[Strip]] | None = None
    ) -> None:
        """Drop the pieces from `index` on and append `piece` (if any)."""
        del self.pieces[index:]
        del self._piece_lines[index:]
        if piece is not None:
            self.pieces.append(piece)
            if self._width:
                if lines is not None and lines[0] == self._width:
                    self._piece_lines.append(lines[1])
                else:
                    self._piece_lines.append(render_lines(piece, self._width))
                    self.renders += 1
            elif lines is not None:
                self._width = lines[0]
                self._piece_lines = [render_lines(p, self._width) for p in self.pieces[:-1]]
                self._piece_lines.append(lines[1])
        self._lines = [line for lines_ in self._piece_lines for line in lines_]
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._render_all(width)
        return len(self._lines)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        self._render_all(width)
        if y >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        return self._lines[y].apply_style(self.rich_style)


class TextLines(Widget):
    """A Rich Text shown through the line API: wrapped once per width and kept, so a repaint
    or a scroll renders nothing again (the heat view, the help)."""

    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(
        self, text: Text | None = None, *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.text = text if text is not None else Text()
        self._width = 0
        self._lines: list[Strip] = []
        self.renders = 0
        """Times the text was wrapped (once per text and width)."""

    def update(self, text: Text, lines: tuple[int, list[Strip]] | None = None) -> None:
        """Show `text`; `lines` (width, lines) is its wrapping made in the worker thread."""
        self.text = text
        self._width, self._lines = lines if lines is not None else (0, [])
        self.refresh(layout=True)

    def _wrap(self, width: int) -> None:
        if width != self._width:
            self._width = width
            self._lines = render_text_lines(self.text, width) if self.text.plain else []
            self.renders += 1

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._wrap(width)
        return len(self._lines)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        self._wrap(width)
        if y >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        return self._lines[y].apply_style(self.rich_style)
