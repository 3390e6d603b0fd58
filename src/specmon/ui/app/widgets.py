"""The chat's widgets. Every text that came from a model or a server is shown through
`safe_text.visible` and as a Text object (never a markup string)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Markdown, Static

from specmon.ui.app.blocks import BlockSplitter
from specmon.ui.app.safe_text import visible
from specmon.ui.app.session_port import AnswerNumbers, ServerSummary

DASH = "—"


def literal(text: str) -> Text:
    """Untrusted text as a Text object: control characters made visible, markup not parsed."""
    return Text(visible(text))


class SafeMarkdown(Markdown):
    """Markdown of untrusted text: links are shown when clicked, never opened."""

    def __init__(self, markdown: str = "", **kwargs: object) -> None:
        super().__init__(visible(markdown), open_links=False, **kwargs)  # type: ignore[arg-type]

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        self.app.notify(f"link (not opened): {visible(event.href)}", markup=False)


class HeaderBar(Horizontal):
    """Server, model, draft and n_spec; a SIMULATED badge that stays while the server is one."""

    def compose(self) -> ComposeResult:
        yield Static("specmon chat — connecting…", id="server-line", markup=False)
        yield Static("SIMULATED", id="sim-badge", markup=False)

    def show(self, server: ServerSummary | None, *, state: str = "") -> None:
        line = self.query_one("#server-line", Static)
        badge = self.query_one("#sim-badge", Static)
        if server is None:
            line.update(literal(f"specmon chat — {state or 'not connected'}"))
            badge.display = False
            return
        parts = [
            server.url,
            f"model {server.model or DASH}",
            f"draft {server.draft_model or DASH}",
            f"n_spec {server.n_spec if server.n_spec is not None else DASH}",
        ]
        if server.max_model_len is not None:
            parts.append(f"ctx {server.max_model_len}")
        if state:
            parts.append(state)
        line.update(literal(" · ".join(parts)))
        badge.display = server.simulated


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


def format_numbers(n: AnswerNumbers) -> str:
    """The line of numbers under an answer; missing values are —."""

    def num(value: float | None, fmt: str) -> str:
        return DASH if value is None else format(value, fmt)

    al = num(n.acceptance_length, ".2f")
    if n.acceptance_length is not None and n.al_source:
        al += f" ({n.al_source})"
    rate = DASH if n.acceptance_rate is None else f"{n.acceptance_rate:.0%}"
    tokens = DASH if n.tokens is None else str(n.tokens)
    ttft = DASH if n.ttft_s is None else f"{n.ttft_s * 1000:.0f} ms"
    return (
        f"{tokens} tokens · {num(n.decode_tok_s, '.1f')} tok/s · TTFT {ttft} · "
        f"AL {al} · accept {rate}"
    )


class AnswerView(Vertical):
    """A streamed answer: settled blocks laid out once, the growing tail redrawn, a final full
    render at the end. `append()` is called at the UI's frame rate, never per token."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.splitter = BlockSplitter()
        self.finished = False
        self.segments = 0

    def compose(self) -> ComposeResult:
        yield Static("", classes="tail", markup=False)
        yield Static("", classes="answer-status", markup=False)

    @property
    def text(self) -> str:
        return self.splitter.text

    def append(self, fragment: str) -> None:
        """Add text that arrived: settle finished blocks, redraw only the tail."""
        if not fragment or self.finished:
            return
        tail = self.query_one(".tail", Static)
        settled = self.splitter.feed(fragment)
        if settled:
            self.segments += 1
            self.mount(SafeMarkdown(settled, classes="settled"), before=tail)
        tail.update(literal(self.splitter.tail))

    def finish(self, status: str = "", *, failed: bool = False) -> None:
        """The answer ended: one full render of the whole text (code blocks close cleanly)."""
        if self.finished:
            return
        self.finished = True
        tail = self.query_one(".tail", Static)
        for block in self.query(".settled"):
            block.remove()
        tail.update("")
        tail.display = False
        text = self.splitter.text
        if text:
            self.mount(SafeMarkdown(text, classes="final"), before=tail)
        if status:
            self.set_status(status, failed=failed)

    def set_status(self, status: str, *, failed: bool = False) -> None:
        line = self.query_one(".answer-status", Static)
        line.update(literal(status))
        line.set_class(failed, "-failed")


class TurnView(Vertical):
    """One turn on screen: the user's prompt, then the answer."""

    def __init__(self, prompt: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        yield Static(literal(self.prompt), classes="prompt")
        yield AnswerView()

    @property
    def answer(self) -> AnswerView:
        return self.query_one(AnswerView)

    def mark_dropped(self) -> None:
        self.add_class("-dropped")
