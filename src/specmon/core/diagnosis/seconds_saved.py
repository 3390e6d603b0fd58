"""Seconds saved (or cost) by speculation, per answer and per session.

With a vanilla baseline (decode tok/s of the same model on the same GPU and vLLM without
speculation: `--baseline`, the stored baseline, or a sweep's n=0), an answer's decode of N-1
tokens (the first token comes from the prefill, which speculation does not change) would have
taken (N-1) / baseline seconds; it took its decode span. The difference is what speculation saved
(positive) or cost (negative). An answer that cost time is flagged with the reason: the vanilla
judge's reason when it has one (no acceptance, throttling, a crowded batch…), else the
acceptance length that did not pay for the verify pass. Session totals are running sums (fixed
size). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_TOKENS = 2


@dataclass(frozen=True, slots=True)
class AnswerSaving:
    """One answer: what it took, what vanilla would have taken, and the difference."""

    request_id: str
    t: float | None
    tokens: int
    actual_s: float
    vanilla_s: float
    saved_s: float
    """Positive: speculation saved this much; negative: it cost this much."""
    cost: bool
    reason: str | None = None
    """Why it cost time (set when `cost`)."""


@dataclass(frozen=True, slots=True)
class SecondsSavedView:
    """Per-session totals and the latest answers' savings."""

    baseline_tok_s: float | None
    answers: int
    answers_cost: int
    saved_s: float
    """Net seconds saved over every measured answer (negative: speculation cost time)."""
    actual_s: float
    vanilla_s: float
    recent: tuple[AnswerSaving, ...]
    """The latest answers (newest last)."""


def answer_saving(
    request_id: str,
    t: float | None,
    completion_tokens: int | None,
    decode_s: float | None,
    baseline_tok_s: float | None,
    acceptance_length: float | None,
    judge_reason: str | None = None,
) -> AnswerSaving | None:
    """The saving of one finished answer; None when it cannot be measured (no baseline, fewer
    than two tokens, no decode span)."""
    if (
        baseline_tok_s is None
        or not (baseline_tok_s > 0 and math.isfinite(baseline_tok_s))
        or completion_tokens is None
        or completion_tokens < MIN_TOKENS
        or decode_s is None
        or not (decode_s > 0 and math.isfinite(decode_s))
    ):
        return None
    vanilla = (completion_tokens - 1) / baseline_tok_s
    saved = vanilla - decode_s
    cost = saved < 0
    reason = None
    if cost:
        if judge_reason:
            reason = judge_reason
        elif acceptance_length is not None:
            reason = (
                f"acceptance length {acceptance_length:.2f} did not pay for the draft and "
                f"verify cost ({completion_tokens - 1} tokens in {decode_s:.2f} s, vanilla "
                f"{vanilla:.2f} s)"
            )
        else:
            reason = f"slower than vanilla ({decode_s:.2f} s against {vanilla:.2f} s)"
    return AnswerSaving(
        request_id=request_id,
        t=t,
        tokens=completion_tokens,
        actual_s=decode_s,
        vanilla_s=vanilla,
        saved_s=saved,
        cost=cost,
        reason=reason,
    )


class SavingsTotals:
    """Running totals over every measured answer (fixed size; the recent ring is the caller's)."""

    __slots__ = ("actual_s", "answers", "answers_cost", "vanilla_s")

    def __init__(self) -> None:
        self.answers = 0
        self.answers_cost = 0
        self.actual_s = 0.0
        self.vanilla_s = 0.0

    def add(self, s: AnswerSaving) -> None:
        self.answers += 1
        self.answers_cost += s.cost
        self.actual_s += s.actual_s
        self.vanilla_s += s.vanilla_s

    def view(
        self, baseline_tok_s: float | None, recent: tuple[AnswerSaving, ...]
    ) -> SecondsSavedView:
        return SecondsSavedView(
            baseline_tok_s=baseline_tok_s,
            answers=self.answers,
            answers_cost=self.answers_cost,
            saved_s=self.vanilla_s - self.actual_s,
            actual_s=self.actual_s,
            vanilla_s=self.vanilla_s,
            recent=recent,
        )
