"""The chat's widgets. Every text that came from a model or a server is shown through
`safe_text.visible` and as a Text object (never a markup string)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.widgets import Input, Static

from specmon.ui.app.blocks import BlockSplitter, skip_blank_lines, top_level_starts
from specmon.ui.app.safe_text import visible
from specmon.ui.app.session_port import AnswerNumbers, ServerSummary

DASH = "—"
CODE_THEME = "monokai"


def literal(text: str) -> Text:
    """Untrusted text as a Text object: control characters made visible, markup not parsed."""
    return Text(visible(text))


class MarkdownText(Static):
    """Markdown of untrusted text, rendered by Rich into ONE leaf widget.

    A leaf's height is cached by width, so a long conversation costs the layout one cached
    number per block; Textual's Markdown widget is a tree of containers that the layout walks
    again (twice per auto-height level) on every reflow, which at 20 frames a second grew to
    most of a core. Links are shown with their address and are not clickable (hyperlinks off);
    control characters are made visible before parsing; markup is never parsed.
    `on_ready` is called once the widget is mounted (its text is then on screen).
    """

    def __init__(
        self,
        markdown: str,
        *,
        on_ready: Callable[[MarkdownText], None] | None = None,
        classes: str | None = None,
    ) -> None:
        from rich.markdown import Markdown as RichMarkdown  # markdown-it: loaded on first answer

        self.raw = visible(markdown)
        """The text this block shows (control characters made visible)."""
        super().__init__(
            RichMarkdown(self.raw, hyperlinks=False, code_theme=CODE_THEME),
            classes=classes,
            markup=False,
        )
        self._on_ready = on_ready
        self._heights: dict[int, int] = {}
        self.ready = False
        """True once mounted: the text is part of the screen from the next paint on."""

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The height at `width`, measured once per width: the text never changes, and Textual
        clears its own cache on every repaint (a mount repaints), which measured each block
        twice — a full Markdown render each time."""
        cached = self._heights.get(width)
        if cached is None:
            cached = super().get_content_height(container, viewport, width)
            self._heights[width] = cached
        return cached

    def on_mount(self) -> None:
        self.ready = True
        ready, self._on_ready = self._on_ready, None
        if ready is not None:
            ready(self)


class HeaderBar(Horizontal):
    """Server, model, draft and n_spec; a SIMULATED badge that stays while the server is one."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    HeaderBar #server-line { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    HeaderBar #sim-badge { width: auto; height: 1; padding: 0 1; text-style: bold; }
    """

    def __init__(self, *, command: str = "chat", simulated: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.command = command
        self.always_simulated = simulated
        """The demo: SIMULATED from the first frame on, before the server answered."""

    def compose(self) -> ComposeResult:
        yield Static(f"specmon {self.command} — connecting…", id="server-line", markup=False)
        badge = Static("SIMULATED", id="sim-badge", markup=False)
        badge.display = self.always_simulated
        yield badge

    def show(self, server: ServerSummary | None, *, state: str = "") -> None:
        line = self.query_one("#server-line", Static)
        badge = self.query_one("#sim-badge", Static)
        if server is None:
            line.update(literal(f"specmon {self.command} — {state or 'not connected'}"))
            badge.display = self.always_simulated
            return
        parts = [
            f"model {server.model or DASH}",
            f"n_spec {server.n_spec if server.n_spec is not None else DASH}",
            f"draft {server.draft_model or DASH}",
        ]
        if server.max_model_len is not None:
            parts.append(f"ctx {server.max_model_len}")
        parts.append(server.url)
        if state:
            parts.append(state)
        line.update(literal(" · ".join(parts)))
        badge.display = server.simulated or self.always_simulated


class PromptInput(Input):
    """The prompt line, with history: up/down walk through the prompts sent before."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "previous prompt", show=False),
        Binding("down", "history(1)", "next prompt", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: list[str] = []
        self._index = 0
        self._draft = ""

    def remember(self, prompt: str) -> None:
        """Add a sent prompt to the history (consecutive repeats kept once)."""
        if prompt and (not self.history or self.history[-1] != prompt):
            self.history.append(prompt)
        self._index = len(self.history)
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._index == len(self.history):
            self._draft = self.value
        index = max(0, min(len(self.history), self._index + step))
        if index == self._index:
            return
        self._index = index
        self.value = self._draft if index == len(self.history) else self.history[index]
        self.cursor_position = len(self.value)


FLAG_WORDS = {
    "ok": "ok",
    "transition": "TRANSITION (F3: why)",
    "vanilla": "VANILLA SPEED (F3: why)",
    "failed": "",
    "unjudged": "",
}


def format_numbers(n: AnswerNumbers) -> str:
    """The line of numbers under an answer; missing values are —."""

    def num(value: float | None, fmt: str) -> str:
        return DASH if value is None else format(value, fmt)

    al = num(n.acceptance_length, ".2f")
    if n.acceptance_length is not None and n.al_source:
        al += f" ({'/metrics' if n.al_source == 'metrics' else n.al_source})"
    rate = DASH if n.acceptance_rate is None else f"{n.acceptance_rate:.0%}"
    tokens = DASH if n.tokens is None else str(n.tokens)
    ttft = DASH if n.ttft_s is None else f"{n.ttft_s * 1000:.0f} ms"
    parts = [
        f"{tokens} tokens",
        f"{num(n.decode_tok_s, '.1f')} tok/s",
        f"TTFT {ttft}",
        f"AL {al}",
        f"accept {rate}",
    ]
    if n.gpu_temp_c is not None or n.sm_clock_mhz is not None:
        parts.append(f"GPU {num(n.gpu_temp_c, '.0f')} °C SM {num(n.sm_clock_mhz, '.0f')} MHz")
    flag = FLAG_WORDS[n.flag]
    if flag:
        parts.append(flag)
    return " · ".join(parts)


class StatusLine(Static):
    """The line of numbers under an answer; a click asks why its badge says what it says."""

    class Clicked(Message):
        def __init__(self, answer: AnswerView) -> None:
            super().__init__()
            self.answer = answer

    def on_click(self) -> None:
        parent = self.parent
        if isinstance(parent, AnswerView):
            self.post_message(StatusLine.Clicked(parent))


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
        self._status = StatusLine("", classes="answer-status", markup=False)
        self.numbers: AnswerNumbers | None = None
        """The numbers shown on the status line (the badge's reasons come from them)."""
        self._pending: list[str] = []
        """Settled text not yet given to a Markdown widget (before mount)."""
        self._laying_out: dict[int, str] = {}
        """Settled text whose Markdown widget is not ready yet, by widget id()."""
        self._final_pending = False
        self._tail_text = ""
        self._blocks: list[tuple[int, MarkdownText]] = []
        """Each streamed block widget with the offset where its text starts."""
        self._mounted_upto = 0
        """Offset up to which settled text has been given to block widgets."""
        self._stale: list[MarkdownText] = []
        self._retired: set[int] = set()
        self.rerendered_chars = 0
        """How much of the text the final render laid out again (the rest stayed as streamed)."""

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
        settled = self.splitter.feed(fragment)
        if settled:
            self._pending.append(settled)
        if self._tail.is_mounted:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            block = MarkdownText(text, on_ready=self._block_ready, classes="settled")
            self._blocks.append((self._mounted_upto, block))
            self._mounted_upto += len(text)
            self._laying_out[id(block)] = text
            self.segments += 1
            self.mount(block, before=self._tail)
        self._draw_tail()

    def _draw_tail(self) -> None:
        if self._tail.display:  # until the final render replaces it
            self._tail_text = visible("".join(self._laying_out.values()) + self.splitter.tail)
            self._tail.update(Text(self._tail_text))

    def _block_ready(self, block: MarkdownText) -> None:
        if id(block) in self._retired:
            return
        self._laying_out.pop(id(block), None)
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
        (a loose list cut at a blank line, an unclosed code fence, the tail) is laid out again
        as one block."""
        self._final_pending = False
        if not self.is_attached:  # removed (the app is closing)
            return
        self._pending.clear()
        text = self.splitter.text
        blocks = self._blocks
        starts = top_level_starts(text) if text else {0}
        keep = 0
        for i, (offset, _block) in enumerate(blocks):
            end = blocks[i + 1][0] if i + 1 < len(blocks) else self._mounted_upto
            if skip_blank_lines(text, offset) not in starts:
                break
            if skip_blank_lines(text, end) not in starts:
                break
            keep = i + 1
        rest_from = blocks[keep][0] if keep < len(blocks) else self._mounted_upto
        self._stale = [block for _offset, block in blocks[keep:]]
        self._blocks = blocks[:keep]
        self.rerendered_chars = len(text) - rest_from
        rest = text[rest_from:]
        if rest.strip():
            self.mount(
                MarkdownText(rest, on_ready=self._final_ready, classes="final"),
                before=self._stale[0] if self._stale else self._tail,
            )
        else:
            self._final_ready(None)

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
        self._status.update(literal(status))
        self._status.set_class(failed, "-failed")


class TurnView(Vertical):
    """One turn on screen: the user's prompt, then the answer."""

    def __init__(self, prompt: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.prompt = prompt
        self.answer = AnswerView()

    def compose(self) -> ComposeResult:
        yield Static(literal(self.prompt), classes="prompt")
        yield self.answer

    def mark_dropped(self) -> None:
        self.add_class("-dropped")
