"""Acceptance length against context length: where acceptance falls off.

Every decode chunk of an answer (one speculative step when the server sends one chunk per step)
emitted `tokens` tokens at a context of `prompt_tokens + tokens generated before it`. The fold
`ContextBins` adds each step to a fixed bin of context length (BIN_EDGES), keeping two numbers a
bin (steps, tokens), so its state is the same size after a minute or a day; a bin's acceptance
length is tokens / steps. `find_cliff` then looks for the split of the bins that maximises the
drop of pooled AL from below to above it, and reports it when the drop is large enough
("AL 3.4 below 8k, 1.6 past 20k").

Steps are taken as client AL takes them (core.stream_stats): the first chunk (the prefill's
token), merged chunks (more than K+1 tokens) and the final chunk cut by the stop are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

BIN_EDGES: tuple[int, ...] = (
    0,
    512,
    1024,
    2048,
    4096,
    6144,
    8192,
    12288,
    16384,
    20480,
    24576,
    32768,
    49152,
    65536,
    98304,
    131072,
)
"""Lower edges of the context-length bins (tokens); the last bin is open-ended."""

MIN_STEPS_PER_SIDE = 20
"""A cliff needs at least this many steps on each side of the split."""
MIN_ANSWERS_PER_SIDE = 10
"""... and steps from at least this many answers on each side (an answer counted once per bin it
reached): a chat whose context grows while the server goes through a degradation cycle (5 fast,
1 transition, 3 slow, 1 recovery) has its slow answers at longer contexts for a while; with a
cycle's worth of answers on each side both sides hold the same mix and nothing is called a cliff."""
MIN_BIN_STEPS = 5
"""Bins with fewer steps are shown but take no part in locating the cliff's edges."""
MIN_DROP_FRAC = 0.25
"""A cliff is reported when the pooled AL above the split is at least this much lower."""


@dataclass(frozen=True, slots=True)
class ContextBinView:
    """One bin of context length: [lo_tokens, hi_tokens) (hi None = open-ended)."""

    lo_tokens: int
    hi_tokens: int | None
    steps: int
    tokens: int
    acceptance_length: float | None


@dataclass(frozen=True, slots=True)
class ContextCliffView:
    """Acceptance by context length and the falling-off point, when there is one."""

    bins: tuple[ContextBinView, ...]
    """Only the bins that saw steps, in context order."""
    steps: int
    detected: bool
    below_tokens: int | None = None
    """AL `al_below` holds below this context length."""
    past_tokens: int | None = None
    """AL has fallen to `al_past` past this context length."""
    al_below: float | None = None
    al_past: float | None = None
    drop_frac: float | None = None
    summary: str = ""
    """E.g. "AL 3.4 below 8k, 1.6 past 20k" (empty when nothing fell off)."""


def bin_index(context_tokens: int, edges: Sequence[int] = BIN_EDGES) -> int:
    """The bin of a context length (the last edge at or below it; 0 for negative input)."""
    lo, hi = 0, len(edges) - 1
    if context_tokens < edges[0]:
        return 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if edges[mid] <= context_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def answer_steps(
    prompt_tokens: int | None,
    cumulative: Sequence[int | None],
    *,
    n_spec: int | None,
    final_cut: bool,
) -> list[tuple[int, int]]:
    """(context at the step's start, tokens it emitted) for each counted decode step of one
    answer, from the chunks' cumulative completion tokens. Empty without a prompt length."""
    if prompt_tokens is None or prompt_tokens < 0:
        return []
    deltas: list[tuple[int, int]] = []
    prev = 0
    for cum in cumulative:
        if cum is None:
            continue
        d = cum - prev
        if d > 0:
            deltas.append((prompt_tokens + prev, d))
        prev = cum
    steps = deltas[1:]  # the first chunk is the prefill's token
    if final_cut and steps:
        steps = steps[:-1]
    if n_spec is not None and n_spec >= 0:
        steps = [s for s in steps if s[1] <= n_spec + 1]
    return steps


def _k(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


class ContextBins:
    """Fixed-size fold: steps and tokens per context bin."""

    __slots__ = ("answers", "edges", "steps", "tokens")

    def __init__(self, edges: Sequence[int] = BIN_EDGES) -> None:
        if not edges or list(edges) != sorted(set(edges)) or edges[0] != 0:
            raise ValueError("context bin edges must be increasing and start at 0")
        self.edges = tuple(edges)
        self.steps = [0] * len(self.edges)
        self.tokens = [0] * len(self.edges)
        self.answers = [0] * len(self.edges)

    def add(self, context_tokens: int, tokens: int) -> None:
        """One step of `tokens` tokens at `context_tokens` of context."""
        if tokens <= 0:
            return
        i = bin_index(context_tokens, self.edges)
        self.steps[i] += 1
        self.tokens[i] += tokens

    def add_answer(self, steps: Sequence[tuple[int, int]]) -> None:
        for context, tokens in steps:
            self.add(context, tokens)
        for i in {bin_index(context, self.edges) for context, tokens in steps if tokens > 0}:
            self.answers[i] += 1

    def view(self) -> ContextCliffView:
        return find_cliff(self.edges, self.steps, self.tokens, self.answers)


def find_cliff(
    edges: Sequence[int],
    steps: Sequence[int],
    tokens: Sequence[int],
    answers: Sequence[int] | None = None,
) -> ContextCliffView:
    """The bins' view and the split with the largest pooled-AL drop (see the module text);
    `answers` (per bin; None: not counted) must reach MIN_ANSWERS_PER_SIDE on each side."""
    n = len(edges)
    bins = tuple(
        ContextBinView(
            lo_tokens=edges[i],
            hi_tokens=edges[i + 1] if i + 1 < n else None,
            steps=steps[i],
            tokens=tokens[i],
            acceptance_length=tokens[i] / steps[i] if steps[i] else None,
        )
        for i in range(n)
        if steps[i] > 0
    )
    total = sum(steps)
    best: tuple[float, int, float, float] | None = None
    for s in range(1, n):
        s_lo, t_lo = sum(steps[:s]), sum(tokens[:s])
        s_hi, t_hi = total - s_lo, sum(tokens) - t_lo
        if s_lo < MIN_STEPS_PER_SIDE or s_hi < MIN_STEPS_PER_SIDE:
            continue
        if answers is not None and (
            sum(answers[:s]) < MIN_ANSWERS_PER_SIDE or sum(answers[s:]) < MIN_ANSWERS_PER_SIDE
        ):
            continue
        al_lo, al_hi = t_lo / s_lo, t_hi / s_hi
        drop = (al_lo - al_hi) / al_lo
        if best is None or drop > best[0]:
            best = (drop, s, al_lo, al_hi)
    if best is None or best[0] < MIN_DROP_FRAC or not math.isfinite(best[0]):
        return ContextCliffView(bins=bins, steps=total, detected=False)
    drop, split, _, _ = best
    # Where it holds: the bins below the split down to the last well-filled bin before it;
    # where it has fallen: the first well-filled bin from the split on whose AL is below the
    # midpoint of the two sides, and everything past it.
    filled = [i for i in range(n) if steps[i] >= MIN_BIN_STEPS]
    below_end = split
    lo_steps, lo_tok = sum(steps[:split]), sum(tokens[:split])
    al_below = lo_tok / lo_steps
    hi_all = sum(tokens[split:]) / sum(steps[split:])
    mid = (al_below + hi_all) / 2
    past = next(
        (i for i in filled if i >= split and tokens[i] / steps[i] < mid),
        split,
    )
    p_steps, p_tok = sum(steps[past:]), sum(tokens[past:])
    al_past = p_tok / p_steps if p_steps else hi_all
    below_tokens = edges[below_end]
    past_tokens = edges[past]
    return ContextCliffView(
        bins=bins,
        steps=total,
        detected=True,
        below_tokens=below_tokens,
        past_tokens=past_tokens,
        al_below=al_below,
        al_past=al_past,
        drop_frac=drop,
        summary=f"AL {al_below:.1f} below {_k(below_tokens)}, {al_past:.1f} past {_k(past_tokens)}",
    )
