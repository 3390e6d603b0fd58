"""The chat's widgets. Every text that came from a model or a server is shown through
`formatting.visible` and as a Text object (never a markup string)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from specmon.core.redaction import redact_url
from specmon.core.server_timing import TtftSplit
from specmon.core.verdict import VerdictKind
from specmon.ui.answer_numbers import AnswerNumbers
from specmon.ui.formatting import DASH, fmt, fmt_frac_pct, visible
from specmon.ui.port import ServerSummary
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.diagnosis_panel import ttft_text
from specmon.ui.widgets.ordered_input import OrderedInput


def literal(text: str) -> Text:
    """Untrusted text as a Text object: control characters made visible, markup not parsed."""
    return Text(visible(text))


class HeaderBar(Horizontal):
    """Server, model, draft and n_spec; a SIMULATED badge that stays while the server is one."""

    DEFAULT_CSS = """
    HeaderBar { dock: top; height: 1; background: $primary-background; }
    HeaderBar #server-line { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    HeaderBar #sim-badge {
        width: auto; height: 1; padding: 0 1; background: $warning; color: $background;
        text-style: bold;
    }
    """

    def __init__(
        self, *, command: str = "chat", simulated: bool = False, id: str | None = None
    ) -> None:
        super().__init__(id=id)
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
        parts.append(redact_url(server.url) or server.url)
        if state:
            parts.append(state)
        line.update(literal(" · ".join(parts)))
        badge.display = server.simulated or self.always_simulated


class PromptInput(OrderedInput):
    """The prompt line, with history: up/down walk through the prompts sent before."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "previous prompt", show=False),
        Binding("down", "history(1)", "next prompt", show=False),
    ]

    def __init__(self, *, placeholder: str = "", id: str | None = None) -> None:
        super().__init__(placeholder=placeholder, id=id)
        self.history: list[str] = []
        self._index = 0
        self._draft = ""

    def remember(self, prompt: str) -> None:
        """Add a sent prompt to the history (consecutive repeats kept once)."""
        if prompt and (not self.history or self.history[-1] != prompt):
            self.history.append(prompt)
        self._index = len(self.history)
        self._draft = ""

    async def action_submit(self) -> None:
        """Enter: the line goes out (Input.Submitted) and the field is emptied at once, so what
        is typed after Enter, even in the same burst of keys, starts the next line. The screen
        gives the line back (`give_back`) when it does not send it."""
        await super().action_submit()
        self.value = ""

    def give_back(self, line: str) -> None:
        """Put back a submitted line that was not sent, before anything typed since."""
        self.value = line + self.value
        self.cursor_position = len(self.value)

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


FLAG_WORDS: dict[VerdictKind, str] = {
    "ok": "ok",
    "loop": "LOOP (F3: why)",
    "garbled": "GARBLED (F3: why)",
    "transition": "TRANSITION (F3: why)",
    "vanilla-speed": "VANILLA SPEED (F3: why)",
    "failed": "",
    "cancelled": "",
    "running": "",
    "unjudged": "",
}
"""The badge under an answer, per verdict (a failed answer says so in its status line)."""


def format_numbers(n: AnswerNumbers, ttft_split: TtftSplit | None = None) -> str:
    """The line of numbers under an answer; missing values are —. With the request's TTFT split
    (the server's per-request timing) the TTFT value says it: "TTFT 366 ms (engine 33 ms,
    outside 333 ms)", the client's TTFT once."""

    al = fmt(n.acceptance_length, ".2f")
    if n.acceptance_length is not None and n.al_source:
        al += f" ({'/metrics' if n.al_source == 'metrics' else n.al_source})"
    rate = fmt_frac_pct(n.acceptance_rate)
    tokens = fmt(n.tokens, "d")
    ttft = fmt(None if n.ttft_s is None else n.ttft_s * 1000, ".0f", " ms")
    parts = [
        f"{tokens} tokens",
        f"{fmt(n.decode_tok_s, '.1f')} tok/s",
        f"TTFT {ttft}" if ttft_split is None else ttft_text(ttft_split),
        f"AL {al}",
        f"accept {rate}",
    ]
    if n.gpu_temp_c is not None or n.sm_clock_mhz is not None:
        parts.append(f"GPU {fmt(n.gpu_temp_c, '.0f')} °C SM {fmt(n.sm_clock_mhz, '.0f')} MHz")
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


class TurnView(Vertical):
    """One turn on screen: the user's prompt, then the answer."""

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt
        self.answer = AnswerView(status=StatusLine("", classes="answer-status", markup=False))

    def compose(self) -> ComposeResult:
        yield Static(literal(self.prompt), classes="prompt")
        yield self.answer

    def mark_dropped(self) -> None:
        self.add_class("-dropped")
