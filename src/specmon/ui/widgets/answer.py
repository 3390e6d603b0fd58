"""How a streamed answer is drawn: settled Markdown laid out once (off the UI thread when large),
only the growing tail redrawn.

`SettledLines` (widgets/lines.py) holds the settled pieces in one leaf widget. Rich renders
their Markdown to lines once per width (widgets/markdown_lines.py) and the widget keeps them
(the line API: `render_line` returns a cached line), so neither a reflow nor a repaint renders
Markdown again; a `Static` showing the same Markdown rendered it twice per mount (once to
measure its height, once to paint) and again after every reflow that cleared Textual's style
cache.

`AnswerView` feeds the text to `blocks.BlockSplitter`. A settled block of at least
`BACKGROUND_MIN_CHARS` is rendered to lines in a worker thread at the view's current width, and
mounted when its lines are ready; until then its text stays in the plain tail, so nothing blinks
out and no frame waits for Rich. Inside a long code fence (or a long run of lines without a blank
line) the splitter settles whole lines every few lines, so the tail stays short: such a piece is
rendered with its fence re-opened / closed and the code block's padding line trimmed where it
joins its neighbours, so the pieces read as one block. The final render at the end lays out again
only what can differ from the whole text's parse. While an answer streams, full garbage
collections wait (widgets/gc_pause.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widgets import Static

from specmon.core.step_heat import AnswerHeat, HeatClass
from specmon.ui.formatting import visible
from specmon.ui.widgets import gc_pause
from specmon.ui.widgets.blocks import BlockSplitter, skip_blank_lines, top_level_starts
from specmon.ui.widgets.heat import heat_text
from specmon.ui.widgets.lines import SettledLines, TextLines
from specmon.ui.widgets.markdown_lines import Piece, executor, in_background

if TYPE_CHECKING:
    from specmon.ui.answer_numbers import AnswerNumbers

BACKGROUND_MIN_CHARS = 512
"""Settled text at least this long is rendered to lines in the worker thread, not in a frame."""


class AnswerView(Vertical):
    """A streamed answer: settled text laid out once, the growing tail redrawn, a final full
    render at the end. `append()` is called at the UI's frame rate, never per token.

    Settled text stays in the tail until its lines are in `SettledLines` (the same callback
    moves it), so nothing blinks out between two frames. Text that arrives before the widget is
    mounted is kept and shown once it is.
    """

    def __init__(
        self, *, status: Static | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        """`status` is the widget of the numbers line under the answer (a plain `Static` by
        default; the app may pass its own, e.g. one that reacts to a click)."""
        super().__init__(id=id, classes=classes)
        executor()  # started (and warmed up) before the first text arrives
        self.splitter = BlockSplitter()
        self.finished = False
        self.numbers: AnswerNumbers | None = None
        """The numbers shown on the status line (set by the screen; the badge's reasons)."""
        self.segments = 0
        """Pieces of settled text handed to the settled lines (streamed)."""
        self.settled = SettledLines(classes="settled")
        self._tail = Static("", classes="tail", markup=False)
        self._status = (
            status if status is not None else Static("", classes="answer-status", markup=False)
        )
        self._pending: list[Piece] = []
        """Settled text not yet handed on (before mount)."""
        self._laying_out: dict[int, str] = {}
        """Settled text being rendered in the worker thread, by piece number (shown in the tail)."""
        self._next_piece = 0
        self._final_pending = False
        self._tail_text = ""
        self._spans: list[tuple[int, int]] = []
        """Each streamed piece's (start, end) offsets in the text, in `settled.pieces` order."""
        self._upto = 0
        """Offset up to which settled text has been handed on."""
        self._generation = 0
        """Bumped by the final render: pieces rendered for an older generation are dropped."""
        self._in_flight = 0
        """Streamed pieces being rendered in the worker thread."""
        self.rerendered_chars = 0
        """How much of the text the final render laid out again (the rest stayed as streamed)."""
        self.background_renders = 0
        """Pieces whose lines were rendered in the worker thread."""
        self._holding_gc = False
        self.heat: AnswerHeat | None = None
        """The acceptance heat shown, or being laid out (None: the answer is Markdown)."""
        self._heat_generation = 0
        self._heat_view = TextLines(classes="heat")
        self._heat_view.display = False

    def compose(self) -> ComposeResult:
        yield self.settled
        yield self._tail
        yield self._heat_view
        yield self._status

    def show_heat(self, heat: AnswerHeat | None, styles: Mapping[HeatClass, Style]) -> None:
        """Colour the answer by engine step (its plain text, one span per run of a class), or
        with None go back to the Markdown rendering. A long text (as long as Markdown that is
        rendered off the UI thread) is wrapped in the worker thread; the Markdown stays on screen
        until its lines are ready."""
        self.heat = heat
        self._heat_generation += 1
        if heat is None:
            self._heat_view.update(Text())
            self._heat_on(False)
            return
        text = heat_text(self.text, heat, styles)
        width = self.settled.content_size.width or self._heat_view.content_size.width
        if width > 0 and len(text) >= BACKGROUND_MIN_CHARS:
            generation = self._heat_generation
            self.background_renders += 1
            in_background(text, width, lambda lines: self._heat_rendered(generation, text, lines))
            return
        self._heat_view.update(text)
        self._heat_on(True)

    def _heat_rendered(
        self, generation: int, text: Text, lines: tuple[int, list[Strip]] | None
    ) -> None:
        if generation != self._heat_generation or not self.is_attached:
            return  # turned off (or recoloured) meanwhile
        self._heat_view.update(text, lines)
        self._heat_on(True)

    def _heat_on(self, on: bool) -> None:
        self._heat_view.display = on
        self.settled.display = not on
        # The tail holds text until the final render takes it over: hidden under the heat (which
        # shows the whole text), back when the heat goes off before the final render is done.
        self._tail.display = not on and bool(self._tail_text)

    @property
    def heat_shown(self) -> Text | None:
        """The heat-coloured text on screen (None when heat is off)."""
        if self.heat is None or not self._heat_view.display:
            return None
        return self._heat_view.text

    def on_mount(self) -> None:
        if self._final_pending:
            self._render_final()
        else:
            self._flush()

    @property
    def text(self) -> str:
        return self.splitter.text

    @property
    def blocks(self) -> list[str]:
        """The text of each laid-out piece, in screen order (control characters made visible)."""
        return [piece.text for piece in self.settled.pieces]

    @property
    def shown_text(self) -> str:
        """What the widgets show now, in screen order: the laid-out pieces, then the tail
        (checked by the no-loss test; control characters made visible)."""
        shown = self.blocks
        if self._tail.display:
            shown.append(self._tail_text)
        return "".join(shown)

    @property
    def rendering(self) -> int:
        """Pieces still being rendered in the worker thread (their text is in the tail)."""
        return len(self._laying_out)

    def append(self, fragment: str) -> None:
        """Add text that arrived: settle finished blocks, redraw only the tail."""
        if not fragment or self.finished:
            return
        if not self._holding_gc:
            self._holding_gc = True
            gc_pause.hold()
        splitter = self.splitter
        open_fence, continues = splitter.settled_fence, splitter.settled_mid_block
        settled = splitter.feed(fragment)
        if settled:
            before = splitter.settled - len(settled)
            gap = not continues and bool(splitter.text[:before].strip())
            self._pending.append(Piece(settled, open_fence, splitter.settled_fence_marker, gap))
        if self._tail.is_mounted:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            pieces = self._pending
            self._pending = []
            first = pieces[0]
            piece = Piece(
                "".join(p.text for p in pieces),
                first.open_fence,
                pieces[-1].ends_in_fence,
                first.gap,
            )
            start = self._upto
            self._upto += len(piece.text)
            self.segments += 1
            shown = _shown(piece)
            width = self.settled.content_size.width or self.content_size.width
            if width > 0 and (len(piece.text) >= BACKGROUND_MIN_CHARS or self._in_flight):
                # (while one is in flight the next follows it, so pieces stay in order)
                number = self._next_piece
                self._next_piece += 1
                self._laying_out[number] = piece.text
                self._in_flight += 1
                self.background_renders += 1
                generation = self._generation
                span = (start, self._upto)
                in_background(
                    shown,
                    width,
                    lambda lines: self._rendered(generation, number, span, shown, lines),
                )
            else:
                self._spans.append((start, self._upto))
                self.settled.add(shown)
        self._draw_tail()

    def _rendered(
        self,
        generation: int,
        number: int,
        span: tuple[int, int],
        piece: Piece,
        lines: tuple[int, list[Strip]] | None,
    ) -> None:
        if generation != self._generation or not self.is_attached:
            return  # the final render took over this text
        self._in_flight -= 1
        self._laying_out.pop(number, None)
        self._spans.append(span)
        self.settled.add(piece, lines)
        self._draw_tail()

    def _draw_tail(self) -> None:
        if self._tail.display:  # until the final render replaces it
            self._tail_text = visible("".join(self._laying_out.values()) + self.splitter.tail)
            self._tail.update(Text(self._tail_text))

    def finish(self, status: str = "", *, failed: bool = False) -> None:
        """The answer ended: one full render of the whole text (code blocks close cleanly)."""
        if self.finished:
            return
        self.finished = True
        if status:
            self.set_status(status, failed=failed)
        if self._tail.is_mounted:
            # After the frame that shows the last text is painted: the full render of a long
            # answer must not hold back the paint of its last chunks.
            self.call_after_refresh(self._render_final)
        else:
            self._final_pending = True

    def _render_final(self) -> None:
        """The final render: the whole text is parsed once; streamed pieces that are whole
        top-level blocks of it stay as they are, and everything from the first one that is not
        (a loose list cut at a blank line, a piece of a code fence, the tail, a piece still
        being rendered) is laid out again as one piece, in the worker thread when it is long."""
        self._final_pending = False
        if not self.is_attached:  # removed (the app is closing)
            return
        self._pending.clear()
        self._generation += 1
        self._in_flight = 0
        text = self.splitter.text
        spans = self._spans
        starts = top_level_starts(text) if text else {0}
        keep = 0
        for start, end in spans:
            if skip_blank_lines(text, start) not in starts:
                break
            if skip_blank_lines(text, end) not in starts:
                break
            keep += 1
        rest_from = spans[keep][0] if keep < len(spans) else (spans[-1][1] if spans else 0)
        self.rerendered_chars = len(text) - rest_from
        rest = text[rest_from:]
        piece = _shown(Piece(rest, gap=keep > 0)) if rest.strip() else None
        width = self.settled.content_size.width or self.content_size.width
        if piece is not None and width > 0 and len(rest) >= BACKGROUND_MIN_CHARS:
            self.background_renders += 1
            generation = self._generation
            in_background(
                piece, width, lambda lines: self._final_rendered(generation, keep, piece, lines)
            )
        else:
            self._final_rendered(self._generation, keep, piece, None)

    def _final_rendered(
        self,
        generation: int,
        keep: int,
        piece: Piece | None,
        lines: tuple[int, list[Strip]] | None,
    ) -> None:
        """The final piece is rendered: it replaces the streamed pieces from `keep` on and the
        tail, in one step (no blank frame between)."""
        if generation != self._generation or not self.is_attached:
            return
        self.settled.replace_from(keep, piece, lines)
        del self._spans[keep:]
        self._laying_out.clear()
        self._tail_text = ""
        self._tail.update("")
        self._tail.display = False
        self._release_gc()

    def _release_gc(self) -> None:
        if self._holding_gc:
            self._holding_gc = False
            self.call_after_refresh(gc_pause.release)  # after the final text is painted

    def on_unmount(self) -> None:
        if self._holding_gc:
            self._holding_gc = False
            gc_pause.release()

    def set_status(self, status: str, *, failed: bool = False) -> None:
        self._status.update(ValuesLine(Text(visible(status))))
        self._status.set_class(failed, "-failed")


VALUES_SEPARATOR = " · "
"""Between the values of an answer's numbers line ("12 tokens · 80.1 tok/s · TTFT 366 ms …")."""


class ValuesLine:
    """A line of values separated by VALUES_SEPARATOR, wrapped only between values: a value
    ("TTFT 366 ms (engine 33 ms, outside 333 ms)") is never cut in two where it fits a line of
    its own (Rich and Textual break at any space, non-breaking ones included). A value wider
    than the whole line wraps at its spaces, as plain text does. `str()` is the plain text."""

    def __init__(self, text: Text, separator: str = VALUES_SEPARATOR) -> None:
        self.text = text
        self.separator = separator

    def __str__(self) -> str:
        return self.text.plain

    def values(self) -> list[Text]:
        """The values, each with its styles."""
        plain, sep = self.text.plain, self.separator
        out: list[Text] = []
        start = 0
        while (at := plain.find(sep, start)) >= 0:
            out.append(self.text[start:at])
            start = at + len(sep)
        out.append(self.text[start:])
        return out

    def lines(self, width: int) -> list[Text]:
        """The values packed into lines of at most `width` cells (a value wider stays whole)."""
        lines: list[Text] = []
        line: Text | None = None
        for value in self.values():
            if line is None:
                line = value.copy()
            elif cell_len(line.plain) + len(self.separator) + cell_len(value.plain) <= width:
                line.append(self.separator)
                line.append_text(value)
            else:
                lines.append(line)
                line = value.copy()
        if line is not None:
            lines.append(line)
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            line.end = "\n"
            yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(v.plain) for v in self.values()), default=0)
        return Measurement(min(widest, options.max_width), cell_len(self.text.plain))


def _shown(piece: Piece) -> Piece:
    """`piece` with control characters made visible (what is parsed and shown)."""
    return Piece(
        visible(piece.text),
        None if piece.open_fence is None else visible(piece.open_fence),
        piece.ends_in_fence,
        piece.gap,
    )
