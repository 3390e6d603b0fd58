"""The conversation of a chat: its turns, the messages a new request sends, and what to drop when
the conversation no longer fits the model's context (`max_model_len` from /v1/models).

Pure logic (no textual, no I/O), so the trimming rule is tested exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

TurnStatus = Literal["streaming", "ok", "failed", "cancelled"]

CHARS_PER_TOKEN = 3.0
"""Used to estimate tokens of text whose count the server has not reported: fewer characters
per token than typical English (about 4) so the estimate errs on the side of too many tokens."""
MESSAGE_OVERHEAD_TOKENS = 8
"""Chat-template tokens around each message (role markers, separators), estimated."""
SAFETY_TOKENS = 16
"""Room kept free below max_model_len for what the estimates miss."""
MIN_ANSWER_TOKENS = 16
"""A request whose answer budget would fall below this is refused locally instead."""


def estimate_tokens(text: str) -> int:
    """An over-estimate of the tokens of one message's text, template overhead included."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


@dataclass
class Turn:
    """One user prompt and the model's answer to it (possibly partial)."""

    prompt: str
    answer: str = ""
    status: TurnStatus = "streaming"
    error: str | None = None
    request_id: str | None = None
    completion_tokens: int | None = None
    """The server's count of the answer's tokens (usage), when known."""
    dropped: bool = False
    """True once the turn was dropped from the context to fit max_model_len (still shown)."""
    system: str | None = None
    """The system prompt the turn was sent with ("": none; None: not known, a turn resumed from
    a record that did not keep it)."""

    def tokens(self) -> int:
        """Estimated tokens this turn adds to a later request's prompt."""
        answer = estimate_tokens(self.answer)
        if self.completion_tokens is not None:
            answer = self.completion_tokens + MESSAGE_OVERHEAD_TOKENS
        return estimate_tokens(self.prompt) + answer

    @property
    def in_context(self) -> bool:
        """Whether a later request sends this turn: not dropped, and with an answer (a turn
        without one would leave two user messages in a row, which strict templates refuse)."""
        return not self.dropped and self.status != "streaming" and bool(self.answer)


@dataclass(frozen=True, slots=True)
class Plan:
    """What to send for a new prompt."""

    messages: tuple[tuple[str, str], ...]
    """Earlier turns as (role, content), oldest first; the system prompt and the new prompt are
    not included."""
    max_tokens: int | None
    drop: tuple[int, ...] = ()
    """Indexes of the turns to mark dropped (oldest first)."""
    error: str | None = None
    """Set when the prompt cannot be sent at all (too long for the context by itself)."""
    notice: str | None = None
    """What the user should be told (turns dropped, answer length capped)."""


@dataclass
class Conversation:
    """The turns of one chat, oldest first."""

    system: str | None = None
    turns: list[Turn] = field(default_factory=list)

    def plan(
        self,
        prompt: str,
        *,
        max_model_len: int | None,
        max_tokens: int | None,
        extra_drop: int = 0,
    ) -> Plan:
        """The messages to send with `prompt`, dropping the oldest turns until the estimate fits
        max_model_len with room for `max_tokens` (all kept when max_model_len is unknown).

        `extra_drop` drops that many more of the oldest kept turns (after a server still said
        the context was too long). With no turn left and still no room, the answer budget is
        capped; a prompt that leaves less than MIN_ANSWER_TOKENS is refused (`error`).
        """
        kept = [i for i, t in enumerate(self.turns) if t.in_context]
        drop = kept[: max(0, extra_drop)]
        kept = kept[len(drop) :]
        cap = max_tokens
        notice_parts: list[str] = []
        if max_model_len is not None:
            fixed = estimate_tokens(prompt) + SAFETY_TOKENS
            if self.system:
                fixed += estimate_tokens(self.system)
            want = max_tokens if max_tokens is not None else MIN_ANSWER_TOKENS
            costs = {i: self.turns[i].tokens() for i in kept}
            total = fixed + sum(costs.values())
            while kept and total + want > max_model_len:
                first = kept.pop(0)
                total -= costs[first]
                drop.append(first)
            room = max_model_len - total
            if room < MIN_ANSWER_TOKENS:
                return Plan(
                    (),
                    max_tokens,
                    error=(
                        f"this prompt is too long for the model's context (max_model_len "
                        f"{max_model_len} tokens; about {total} needed before any answer)"
                    ),
                )
            if max_tokens is not None and room < max_tokens:
                cap = room
                notice_parts.append(f"answer capped at {room} tokens to fit max_model_len")
        if drop:
            n = len(drop)
            why = (
                f"to fit max_model_len {max_model_len}"
                if max_model_len is not None
                else "after the server said the context was too long"
            )
            notice_parts.insert(
                0, f"dropped the oldest {n} turn{'s' if n != 1 else ''} from the context {why}"
            )
        messages: list[tuple[str, str]] = []
        for i in kept:
            turn = self.turns[i]
            messages.append(("user", turn.prompt))
            messages.append(("assistant", turn.answer))
        return Plan(
            tuple(messages),
            cap,
            tuple(drop),
            notice="; ".join(notice_parts) or None,
        )

    def drop_oldest(self, n: int) -> tuple[int, ...]:
        """Mark the `n` oldest turns still in the context dropped (the server said the context
        was too long and the request went without them); their indexes."""
        kept = [i for i, t in enumerate(self.turns) if t.in_context][: max(0, n)]
        for i in kept:
            self.turns[i].dropped = True
        return tuple(kept)

    def overflow_notice(self, dropped: Sequence[int]) -> str:
        """The line that names the turns an answer went without (1-based, prompts cut)."""
        named = ", ".join(
            f"turn {i + 1} “{_cut_prompt(self.turns[i].prompt)}”"
            for i in dropped
            if 0 <= i < len(self.turns)
        )
        n = len(dropped)
        return (
            f"the server said the context was too long: the answer was asked again without the "
            f"oldest {n} turn{'s' if n != 1 else ''}: {named or 'none still shown'}"
        )

    def apply_drops(self, plan: Plan) -> None:
        """Mark the plan's dropped turns (they stay on screen, out of the context)."""
        for i in plan.drop:
            self.turns[i].dropped = True


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """The sampling controls sent with each request (None = the server's default)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


def parse_settings(temperature: str, top_p: str, max_tokens: str) -> ChatSettings | str:
    """Settings from the text of three fields (blank = server default), or an error message."""
    t: float | None = None
    p: float | None = None
    m: int | None = None
    try:
        if temperature.strip():
            t = float(temperature)
            if not 0.0 <= t <= 100.0:
                return "temperature must be a number from 0 to 100"
        if top_p.strip():
            p = float(top_p)
            if not 0.0 < p <= 1.0:
                return "top-p must be a number above 0 and at most 1"
    except ValueError:
        return "temperature and top-p must be numbers"
    if max_tokens.strip():
        try:
            m = int(max_tokens)
        except ValueError:
            return "max tokens must be a whole number"
        if m < 1:
            return "max tokens must be at least 1"
    return ChatSettings(t, p, m)


def _cut_prompt(prompt: str, limit: int = 32) -> str:
    """A prompt on one short line, for a notice (shown literally by the caller)."""
    flat = " ".join(prompt.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
