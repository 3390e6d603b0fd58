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
import io
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from specmon.ui.app.blocks import BlockSplitter, skip_blank_lines, top_level_starts
from specmon.ui.app.safe_text import visible

CODE_THEME = "monokai"
BACKGROUND_MIN_CHARS = 512
"""Settled text at least this long is rendered to lines in the worker thread, not in a frame."""

_renderer: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """One worker thread: blocks are rendered (and so mounted) in the order they settled."""
    global _renderer
    if _renderer is None:
        _renderer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="specmon-md")
    return _renderer


@dataclass(frozen=True, slots=True)
class Piece:
    """Settled text to lay out as one widget. `open_fence` is the opening line of the code fence
    the text starts inside (a continuation piece), `ends_in_fence` the marker that closes the
    fence the text ends inside (None when it ends outside one)."""

    text: str
    open_fence: str | None = None
    ends_in_fence: str | None = None

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


def render_lines(piece: Piece, width: int) -> list[Strip]:
    """`piece` rendered by Rich's Markdown at `width` cells (links not clickable), the code
    block's padding line dropped where the piece continues a fence or leaves one open.
    Thread-safe: a private Console per call. Control characters must already be visible."""
    from rich.console import Console
    from rich.markdown import Markdown as RichMarkdown

    width = max(1, width)
    console = Console(
        width=width,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        no_color=False,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )
    markdown = RichMarkdown(piece.markdown(), hyperlinks=False, code_theme=CODE_THEME)
    lines = console.render_lines(markdown, console.options.update_width(width), pad=True)
    if piece.open_fence is not None and lines:
        lines = lines[1:]
    if piece.ends_in_fence is not None and lines:
        lines = lines[:-1]
    return [Strip(line, width) for line in lines]


class MarkdownText(Widget):
    """Markdown of untrusted text in ONE leaf widget, rendered to lines once per width.

    Links are shown with their address and are not clickable (hyperlinks off); control
    characters are made visible before parsing; markup is never parsed. `on_ready` is called
    once the widget is mounted (its text is then on screen). `lines` (width, lines) may carry a
    rendering made in the worker thread.
    """

    DEFAULT_CSS = """
    MarkdownText { height: auto; }
    """

    def __init__(
        self,
        markdown: str | Piece,
        *,
        on_ready: Callable[[MarkdownText], None] | None = None,
        classes: str | None = None,
        lines: tuple[int, list[Strip]] | None = None,
    ) -> None:
        super().__init__(classes=classes)
        piece = markdown if isinstance(markdown, Piece) else Piece(markdown)
        self.piece = Piece(
            visible(piece.text),
            None if piece.open_fence is None else visible(piece.open_fence),
            piece.ends_in_fence,
        )
        self.raw = self.piece.text
        """The text this block shows (control characters made visible)."""
        self._lines: dict[int, list[Strip]] = {}
        if lines is not None:
            self._lines[lines[0]] = lines[1]
        self._on_ready = on_ready
        self.ready = False
        """True once mounted: the text is part of the screen from the next paint on."""
        self.renders = 0
        """How many times Rich rendered this block (once per width it was shown at)."""
        self.number = -1
        """The block's number in its answer (-1: the final render's block)."""

    def lines_at(self, width: int) -> list[Strip]:
        lines = self._lines.get(width)
        if lines is None:
            lines = render_lines(self.piece, width)
            self.renders += 1
            self._lines = {width: lines}  # keep only the current width
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines_at(width))

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        lines = self.lines_at(width)
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        return lines[y].apply_style(self.rich_style)

    def on_mount(self) -> None:
        self.ready = True
        ready, self._on_ready = self._on_ready, None
        if ready is not None:
            ready(self)


class AnswerView(Vertical):
    """A streamed answer: settled blocks laid out once, the growing tail redrawn, a final full
    render at the end. `append()` is called at the UI's frame rate, never per token.

    A settled block's text stays in the tail until its widget is mounted, so nothing blinks
    out between two frames. Text that arrives before the widget is mounted is kept
    and shown once it is.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.splitter = BlockSplitter()
        self.finished = False
        self.segments = 0
        self._tail = Static("", classes="tail", markup=False)
        self._status = Static("", classes="answer-status", markup=False)
        self._pending: list[Piece] = []
        """Settled text not yet given to a Markdown widget (before mount)."""
        self._laying_out: dict[int, str] = {}
        """Settled text whose Markdown widget is not on screen yet, by block number."""
        self._next_block = 0
        self._final_pending = False
        self._tail_text = ""
        self._blocks: list[tuple[int, int, MarkdownText]] = []
        """Each streamed block widget with the offsets where its text starts and ends."""
        self._mounted_upto = 0
        """Offset up to which settled text has been given to block widgets."""
        self._stale: list[MarkdownText] = []
        self._retired: set[int] = set()
        self._generation = 0
        """Bumped by the final render: blocks rendered for an older generation are dropped."""
        self.rerendered_chars = 0
        """How much of the text the final render laid out again (the rest stayed as streamed)."""
        self.background_renders = 0
        """Blocks whose lines were rendered in the worker thread."""
        self._in_flight = 0
        """Streamed blocks being rendered in the worker thread."""

    def compose(self) -> ComposeResult:
        yield self._tail
        yield self._status

    def on_mount(self) -> None:
        if self._final_pending:
            self._render_final()
        else:
            self._flush()

    @property
    def text(self) -> str:
        return self.splitter.text

    @property
    def shown_text(self) -> str:
        """What the widgets show now, in screen order: the Markdown blocks that are laid out,
        then the tail (checked by the no-loss test; control characters made visible)."""
        shown = [b.raw for b in self.query(MarkdownText) if b.ready and id(b) not in self._retired]
        if self._tail.display:
            shown.append(self._tail_text)
        return "".join(shown)

    def append(self, fragment: str) -> None:
        """Add text that arrived: settle finished blocks, redraw only the tail."""
        if not fragment or self.finished:
            return
        open_fence = self.splitter.settled_fence
        settled = self.splitter.feed(fragment)
        if settled:
            self._pending.append(Piece(settled, open_fence, self.splitter.settled_fence_marker))
        if self._tail.is_mounted:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            pieces = self._pending
            self._pending = []
            piece = Piece(
                "".join(p.text for p in pieces), pieces[0].open_fence, pieces[-1].ends_in_fence
            )
            number = self._next_block
            self._next_block += 1
            self._laying_out[number] = piece.text
            self.segments += 1
            offset = self._mounted_upto
            self._mounted_upto += len(piece.text)
            width = self.content_size.width
            if width > 0 and (len(piece.text) >= BACKGROUND_MIN_CHARS or self._in_flight):
                # (while one is in flight the next follows it, so blocks mount in order)
                self._render_in_background(piece, width, number, offset)
            else:
                self._mount_block(number, offset, piece, None)
        self._draw_tail()

    def _render_in_background(self, piece: Piece, width: int, number: int, offset: int) -> None:
        loop = asyncio.get_running_loop()
        generation = self._generation
        shown = Piece(
            visible(piece.text),
            None if piece.open_fence is None else visible(piece.open_fence),
            piece.ends_in_fence,
        )
        future = _executor().submit(render_lines, shown, width)
        self.background_renders += 1
        self._in_flight += 1

        def done(f: concurrent.futures.Future[list[Strip]]) -> None:
            if f.cancelled():
                return
            error = f.exception()
            lines = None if error is not None else (width, f.result())
            loop.call_soon_threadsafe(self._rendered, generation, number, offset, piece, lines)

        future.add_done_callback(done)

    def _rendered(
        self,
        generation: int,
        number: int,
        offset: int,
        piece: Piece,
        lines: tuple[int, list[Strip]] | None,
    ) -> None:
        if generation != self._generation or not self.is_attached:
            return  # the final render took over this text
        self._in_flight -= 1
        self._mount_block(number, offset, piece, lines)

    def _mount_block(
        self, number: int, offset: int, piece: Piece, lines: tuple[int, list[Strip]] | None
    ) -> None:
        block = MarkdownText(piece, on_ready=self._block_ready, classes="settled", lines=lines)
        block.number = number
        self._blocks.append((offset, offset + len(piece.text), block))
        self.mount(block, before=self._tail)

    def _draw_tail(self) -> None:
        if self._tail.display:  # until the final render replaces it
            self._tail_text = visible("".join(self._laying_out.values()) + self.splitter.tail)
            self._tail.update(Text(self._tail_text))

    def _block_ready(self, block: MarkdownText) -> None:
        if id(block) in self._retired:
            return
        self._laying_out.pop(block.number, None)
        self._draw_tail()

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
        """The final render: the whole text is parsed once; streamed blocks that are whole
        top-level blocks of it stay as they are, and everything from the first one that is not
        (a loose list cut at a blank line, a piece of a code fence, the tail, a block still
        being rendered) is laid out again as one block."""
        self._final_pending = False
        self._pending.clear()
        self._generation += 1
        self._in_flight = 0
        text = self.splitter.text
        blocks = self._blocks
        starts = top_level_starts(text) if text else {0}
        keep = 0
        for i, (offset, end, _block) in enumerate(blocks):
            if skip_blank_lines(text, offset) not in starts:
                break
            if skip_blank_lines(text, end) not in starts:
                break
            keep = i + 1
        if keep < len(blocks):
            rest_from = blocks[keep][0]
        elif blocks:
            rest_from = blocks[-1][1]
        else:
            rest_from = 0
        self._stale = [block for _start, _end, block in blocks[keep:]]
        self._blocks = blocks[:keep]
        self.rerendered_chars = len(text) - rest_from
        rest = text[rest_from:]
        if rest.strip():
            before = self._stale[0] if self._stale else self._tail
            width = self.content_size.width
            if len(rest) >= BACKGROUND_MIN_CHARS and width > 0:
                loop = asyncio.get_running_loop()
                piece = Piece(rest)
                shown = Piece(visible(rest))
                generation = self._generation
                self.background_renders += 1

                def done(f: concurrent.futures.Future[list[Strip]]) -> None:
                    lines = None if f.exception() is not None else (width, f.result())
                    loop.call_soon_threadsafe(self._final_rendered, generation, piece, lines)

                _executor().submit(render_lines, shown, width).add_done_callback(done)
            else:
                self.mount(
                    MarkdownText(rest, on_ready=self._final_ready, classes="final"), before=before
                )
        else:
            self._final_ready(None)

    def _final_rendered(
        self, generation: int, piece: Piece, lines: tuple[int, list[Strip]] | None
    ) -> None:
        if generation != self._generation or not self.is_attached:
            return
        before = self._stale[0] if self._stale else self._tail
        self.mount(
            MarkdownText(piece, on_ready=self._final_ready, classes="final", lines=lines),
            before=before,
        )

    def _final_ready(self, _block: MarkdownText | None) -> None:
        """The final blocks are laid out: the replaced ones go (no blank frame between)."""
        self._laying_out.clear()
        for block in self._stale:
            self._retired.add(id(block))  # no longer part of what is shown
            block.remove()
        self._stale = []
        self._tail_text = ""
        self._tail.update("")
        self._tail.display = False

    def set_status(self, status: str, *, failed: bool = False) -> None:
        self._status.update(Text(visible(status)))
        self._status.set_class(failed, "-failed")
