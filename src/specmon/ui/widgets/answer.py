"""How a streamed answer is drawn: settled Markdown laid out once (off the UI thread when large),
only the growing tail redrawn.

`MarkdownText` is one leaf widget per settled block. Rich renders its Markdown to lines once per
width and the widget keeps them (the line API: `render_line` returns a cached line), so neither a
reflow nor a repaint renders Markdown again; a `Static` showing the same Markdown rendered it twice
per mount (once to measure its height, once to paint) and again after every reflow that cleared
Textual's style cache.

`AnswerView` feeds the text to `blocks.BlockSplitter`. A settled block of at least
`BACKGROUND_MIN_CHARS` is rendered to lines in a worker thread at the view's current width, and
mounted when its lines are ready; until then its text stays in the plain tail, so nothing blinks
out and no frame waits for Rich. Inside a long code fence (or a long run of lines without a blank
line) the splitter settles whole lines every few lines, so the tail stays short: such a piece is
rendered with its fence re-opened / closed and the code block's padding line trimmed where it
joins its neighbours, so the pieces read as one block. The final render at the end lays out again
only what can differ from the whole text's parse.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from specmon.core.step_heat import AnswerHeat, HeatClass, coalesce, many_bar
from specmon.ui.formatting import visible
from specmon.ui.widgets.blocks import BlockSplitter, skip_blank_lines, top_level_starts

if TYPE_CHECKING:
    from rich.console import Console

    from specmon.ui.answer_numbers import AnswerNumbers

CODE_THEME = "monokai"
BACKGROUND_MIN_CHARS = 512
"""Settled text at least this long is rendered to lines in the worker thread, not in a frame."""

_renderer: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """One worker thread: blocks are rendered (and so shown) in the order they settled."""
    global _renderer
    if _renderer is None:
        _renderer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="specmon-md")
        # The first Markdown render imports markdown-it, Rich's Markdown and Pygments (about
        # 0.1-0.3 s holding the GIL); do it now, while the first answer is awaited, not in the
        # middle of its stream (it was the late frames of the benchmark at 600 tok/s).
        _renderer.submit(render_lines, Piece(WARM_UP), 80)
    return _renderer


WARM_UP = "# w\n\n*w* `w`\n\n- w\n\n```python\nw = 1\n```\n\n```\nw\n```\n"


@dataclass(frozen=True, slots=True)
class Piece:
    """Settled text to lay out as one widget. `open_fence` is the opening line of the code fence
    the text starts inside (a continuation piece), `ends_in_fence` the marker that closes the
    fence the text ends inside (None when it ends outside one)."""

    text: str
    open_fence: str | None = None
    ends_in_fence: str | None = None
    gap: bool = False
    """A blank line above it: it starts a new top-level block below another (as Rich puts one
    between the top-level blocks of a whole text)."""

    def markdown(self) -> str:
        """The Markdown that renders this piece alone (fences re-opened and closed)."""
        text = self.text
        if self.open_fence is not None:
            text = self.open_fence + "\n" + text
        if self.ends_in_fence is not None:
            if not text.endswith("\n"):
                text += "\n"
            text += self.ends_in_fence + "\n"
        return text


HEAT_DEFAULTS: dict[HeatClass, str] = {
    "many": "#1F6F43",
    "some": "#2D4F6B",
    "single": "#7A2E2E",
    "unknown": "#3A3F47",
    "prefill": "#262B33",
}
"""The heat shades when the theme has no `heat-*` variables (specmon-dark's)."""

HEAT_TEXT_STYLE: dict[HeatClass, str] = {
    "many": "",
    "some": "",
    "single": "underline",
    "unknown": "italic",
    "prefill": "",
}
"""Besides the shade: single-token steps underlined, unknown ones italic (readable without
colour, e.g. under NO_COLOR)."""


def heat_colors(variables: Mapping[str, str]) -> dict[HeatClass, str]:
    """The heat shades from a theme's CSS variables (`heat-many` …), else HEAT_DEFAULTS."""
    return {c: variables.get(f"heat-{c}", d) for c, d in HEAT_DEFAULTS.items()}


def heat_styles(colors: Mapping[HeatClass, str]) -> dict[HeatClass, Style]:
    """A Rich style per heat class: the shade as background, plus HEAT_TEXT_STYLE."""
    out: dict[HeatClass, Style] = {}
    for c, color in colors.items():
        extra = Style.parse(HEAT_TEXT_STYLE[c]) if HEAT_TEXT_STYLE[c] else Style()
        out[c] = Style(bgcolor=color) + extra
    return out


def heat_text(text: str, heat: AnswerHeat, styles: Mapping[HeatClass, Style]) -> Text:
    """The answer's plain text (control characters made visible, not parsed as Markdown) with
    each run of steps of one class styled: one span per run, no per-token objects. Text no
    span covers is left unstyled."""
    out = Text()
    at = 0
    for start, end, cls in coalesce(heat.spans):
        if start < at:
            start = at
        if end <= start:
            continue
        if start > at:
            out.append(visible(text[at:start]))
        out.append(visible(text[start:end]), style=styles[cls])
        at = end
    if at < len(text):
        out.append(visible(text[at:]))
    return out


def heat_legend(styles: Mapping[HeatClass, Style], n_spec: int | None) -> Text:
    """One line saying what the shades mean (the bar for "many" from K)."""
    bar = many_bar(n_spec)
    k = f"of {n_spec}" if n_spec else "(K unknown)"
    words: tuple[tuple[HeatClass, str], ...] = (
        ("many", f"step accepted {bar}+ drafts {k}"),
        ("some", "fewer"),
        ("single", "1 token/step (vanilla-like)"),
        ("unknown", "unknown (merged chunks)"),
        ("prefill", "prefill"),
    )
    out = Text("heat: ", style="bold")
    for i, (cls, word) in enumerate(words):
        if i:
            out.append("  ")
        out.append("  ", style=styles[cls])
        out.append(f" {word}")
    return out


def _empty(line: list[Segment]) -> bool:
    """A line with no text and no background (not a code block's padding line)."""
    return all(
        not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None) for seg in line
    )


def _private_console(width: int) -> Console:
    """A Console of its own (thread-safe rendering), rendering to nothing: truecolor, no emoji,
    no highlighting, `width` cells."""
    from rich.console import Console

    return Console(
        width=width,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        no_color=False,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )


def render_lines(piece: Piece, width: int) -> list[Strip]:
    """`piece` rendered by Rich's Markdown at `width` cells (links not clickable), the code
    block's padding line dropped where the piece continues a fence or leaves one open.
    Thread-safe: a private Console per call. Control characters must already be visible."""
    from rich.markdown import Markdown as RichMarkdown

    width = max(1, width)
    console = _private_console(width)
    markdown = RichMarkdown(piece.markdown(), hyperlinks=False, code_theme=CODE_THEME)
    lines = console.render_lines(markdown, console.options.update_width(width), pad=True)
    # Rich starts some blocks alone with an empty line (a list) and ends some with one; the
    # spacing between pieces is `gap`'s, so plain empty lines at either end go.
    while lines and _empty(lines[0]):
        lines = lines[1:]
    while lines and _empty(lines[-1]):
        lines = lines[:-1]
    if piece.open_fence is not None and lines:
        # The top padding line goes; when the piece starts with the closing fence, Rich also
        # drew the empty code block's one empty line, which the previous piece already ended.
        first = piece.text.split("\n", 1)[0].strip()
        opener = piece.open_fence.strip()
        marker = opener[: len(opener) - len(opener.lstrip(opener[:1]))]
        closes = len(first) >= len(marker) > 0 and set(first) == {marker[0]}
        lines = lines[2:] if closes else lines[1:]
    if piece.ends_in_fence is not None and lines:
        lines = lines[:-1]
    strips = [Strip(line, width) for line in lines]
    if piece.gap and strips:
        strips.insert(0, Strip.blank(width))
    return strips


_streaming = 0
"""Answers streaming now (see `_gc_hold`)."""
_saved_threshold: tuple[int, int, int] | None = None


def _gc_hold() -> None:
    """An answer starts streaming: no full (oldest-generation) garbage collection until it ends.

    Measured on the chat benchmark at 5,000 tok/s: CPython's full collections walked every live
    object (Textual's, Rich's, the answer's lines) and took 100-200 ms each, six times in a
    3-second answer; they were the frames that painted late. Young collections still run (most
    cyclic garbage dies young). Textual pauses the collector during smooth scrolling for the
    same reason (`App.PAUSE_GC_ON_SCROLL`)."""
    global _streaming, _saved_threshold
    if _streaming == 0:
        _saved_threshold = gc.get_threshold()
        gc.set_threshold(_saved_threshold[0], _saved_threshold[1], 1_000_000)
    _streaming += 1


def _gc_release() -> None:
    """An answer ended (after its last frame is painted): when none streams any more, the
    collector's thresholds come back, one full collection runs, and what survives it is frozen
    (`gc.freeze`: the oldest objects are not walked by later full collections, so the next
    answer's pauses stay short)."""
    global _streaming, _saved_threshold
    if _streaming == 0:
        return
    _streaming -= 1
    if _streaming == 0 and _saved_threshold is not None:
        gc.set_threshold(*_saved_threshold)
        _saved_threshold = None
        gc.collect()
        gc.freeze()


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


def render_text_lines(text: Text, width: int) -> list[Strip]:
    """A Rich Text wrapped at `width` cells (whitespace kept: code stays indented). Thread-safe:
    a private Console per call."""
    width = max(1, width)
    console = _private_console(width)
    lines = console.render_lines(text, console.options.update_width(width), pad=True)
    return [Strip(line, width) for line in lines]


class TextLines(Widget):
    """A Rich Text shown through the line API: wrapped once per width and kept, so a repaint
    or a scroll renders nothing again (the heat view, the help)."""

    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(self, text: Text | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
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


class AnswerView(Vertical):
    """A streamed answer: settled text laid out once, the growing tail redrawn, a final full
    render at the end. `append()` is called at the UI's frame rate, never per token.

    Settled text stays in the tail until its lines are in `SettledLines` (the same callback
    moves it), so nothing blinks out between two frames. Text that arrives before the widget is
    mounted is kept and shown once it is.
    """

    def __init__(self, *, status: Static | None = None, **kwargs: object) -> None:
        """`status` is the widget of the numbers line under the answer (a plain `Static` by
        default; the app may pass its own, e.g. one that reacts to a click)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        _executor()  # started (and warmed up) before the first text arrives
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
            _in_background(text, width, lambda lines: self._heat_rendered(generation, text, lines))
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
            _gc_hold()
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
                _in_background(
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
            _in_background(
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
            self.call_after_refresh(_gc_release)  # after the final text is painted

    def on_unmount(self) -> None:
        if self._holding_gc:
            self._holding_gc = False
            _gc_release()

    def set_status(self, status: str, *, failed: bool = False) -> None:
        self._status.update(Text(visible(status)))
        self._status.set_class(failed, "-failed")


def _shown(piece: Piece) -> Piece:
    """`piece` with control characters made visible (what is parsed and shown)."""
    return Piece(
        visible(piece.text),
        None if piece.open_fence is None else visible(piece.open_fence),
        piece.ends_in_fence,
        piece.gap,
    )


def _in_background(
    piece: Piece | Text,
    width: int,
    then: Callable[[tuple[int, list[Strip]] | None], None],
) -> None:
    """Render `piece` (Markdown; or a Text, wrapped as it is) at `width` in the worker thread;
    `then(lines)` runs on this event loop (lines None if the rendering failed: the piece is then
    rendered in the UI thread)."""
    loop = asyncio.get_running_loop()

    def done(future: concurrent.futures.Future[list[Strip]]) -> None:
        if future.cancelled() or future.exception() is not None:
            result = None
        else:
            result = (width, future.result())
        with contextlib.suppress(RuntimeError):  # the app ended meanwhile: nothing to show
            loop.call_soon_threadsafe(then, result)

    if isinstance(piece, Text):
        future = _executor().submit(render_text_lines, piece, width)
    else:
        future = _executor().submit(render_lines, piece, width)
    future.add_done_callback(done)
