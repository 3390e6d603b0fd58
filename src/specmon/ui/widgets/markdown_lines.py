"""Settled answer text and Rich Text turned into lines (`Strip`s) of a given width, once: Rich's
Markdown (`render_lines`, a `Piece` of settled text) and plain Rich Text (`render_text_lines`).
Thread-safe (a private Console per call), so large pieces are rendered in the one worker thread
(`in_background`: blocks are rendered, and so shown, in the order they settled)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

if TYPE_CHECKING:
    from rich.console import Console

CODE_THEME = "monokai"
"""Pygments' theme of the code blocks in answers."""

_renderer: concurrent.futures.ThreadPoolExecutor | None = None


def executor() -> concurrent.futures.ThreadPoolExecutor:
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


def render_text_lines(text: Text, width: int) -> list[Strip]:
    """A Rich Text wrapped at `width` cells (whitespace kept: code stays indented). Thread-safe:
    a private Console per call."""
    width = max(1, width)
    console = _private_console(width)
    lines = console.render_lines(text, console.options.update_width(width), pad=True)
    return [Strip(line, width) for line in lines]


def in_background(
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
        future = executor().submit(render_text_lines, piece, width)
    else:
        future = executor().submit(render_lines, piece, width)
    future.add_done_callback(done)
