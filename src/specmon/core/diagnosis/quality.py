"""The quality sentinel: answers whose acceptance says the text may be a loop or garbled.

Both rules compare an answer's AL with the session's HEALTHY level, not with the mean of every
answer: a degradation cycle puts a third of the answers at AL 1.0 with normal text, and a mean and
standard deviation over those would hide a garbled answer (its AL 1.0 is then "usual"). The
healthy level is the median of the upper half of the last HEALTHY_WINDOW unflagged answers' AL
(the fast answers whenever at most half of them are degraded), its spread 1.4826 x their median
absolute deviation, floored at MIN_SPREAD; a z-score is (AL - level) / spread. It needs
MIN_HISTORY unflagged answers.

- "loop": AL at least LOOP_Z spreads above the healthy level, or at least LOOP_AL_FRAC of the K+1
  ceiling, over at least MIN_TOKENS tokens, AND the text repeats (share of repeated word
  n-grams at least LOOP_REPEAT_SHARE): a drafter accepts nearly everything when the target
  repeats itself. Or, the text's own evidence whatever the AL: at least LOOP_TEXT_SHARE of
  its word n-grams repeat and it is words (less than GARBLED_ODD_SHARE symbol pieces; a
  repeating symbol soup is the garbled flag's case). A loop served while the drafter is
  failing runs at AL 1.0: the target repeats itself but nothing was drafted right. The
  simulator's loops repeat 97% or more of their 4-grams, its ordinary answers at most 1%. Or
  its last TAIL_CHARS characters repeat at least LOOP_TAIL_SHARE of their CHAR_NGRAM-character
  pieces (a loop inside one word, `cach/cach/…`, has no word n-grams; real loops from a small
  learned drafter were served at AL 1.4-1.8 and repeat 0.64-0.96 of them, ordinary code at
  most about 0.3). Or its end repeats one piece of at most LOOP_MAX_PERIOD characters exactly,
  at least LOOP_END_REPEATS times over at least LOOP_END_CHARS characters, whatever the answer's
  length (a loop that starts late covers too little of the last TAIL_CHARS; ordinary code and
  prose end in such a repeat over at most about 130 characters, twice).
- "garbled": AL at least GARBLED_Z spreads below the healthy level while that level is at least
  GOOD_DRAFTER_AL, or (the text's own evidence) AL within GARBLED_NEAR_ONE of 1.0 on such a
  drafter, AND the text is mostly not words (share of whitespace-separated pieces without a letter
  or digit at least GARBLED_ODD_SHARE): the target went somewhere the drafter could not follow
  (wrong chat template, broken quantisation, a runaway sampler). Low acceptance alone is not
  enough: an answer that merely fell to vanilla speed (the vanilla detector's case) reads
  normally and is not flagged.

A flagged answer is judged before its speed (core.verdict): it sets no speed level, is left out
of the degradation cycle, of the thermal attribution and of AL by context, and does not move the
healthy level. `check_answer` is a pure function called once at an answer's end (O(text)).
`ALStats` keeps the session's per-answer AL mean and variance (Welford) for the view.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Literal

NGRAM = 4
"""Word n-gram length for the repetition share."""
MIN_NGRAMS = 16
MAX_TEXT_CHARS = 8192
"""The tail of an answer's text that is kept for the check."""
MIN_TOKENS = 128
"""An answer is judged only over at least this many tokens."""
MIN_HISTORY = 5
"""Unflagged answers before the healthy level is trusted."""
HEALTHY_WINDOW = 64
"""The latest unflagged answers whose AL defines the healthy level."""
MIN_SPREAD = 0.1
"""The healthy level's spread is at least this much AL (a steady drafter has almost none)."""
GARBLED_NEAR_ONE = 0.25
"""An AL within this of 1.0 on a good drafter is garbled when the text is not words."""
LOOP_Z = 3.0
LOOP_AL_FRAC = 0.9
LOOP_REPEAT_SHARE = 0.5
LOOP_TEXT_SHARE = 0.9
"""A text that repeats at least this share of its word n-grams is a loop at any AL."""
TAIL_CHARS = 512
"""The end of an answer's text whose character n-grams show whether it fell into a loop."""
CHAR_NGRAM = 8
MIN_TAIL_NGRAMS = 128
LOOP_TAIL_SHARE = 0.6
"""A text whose last TAIL_CHARS characters repeat at least this share of their CHAR_NGRAM-
character pieces fell into a loop, at any AL: a loop inside one word (`cach/cach/…`,
`_test_test_…`) has no word n-grams, and a small drafter can fail to follow a loop (real loops
were served at AL 1.4-1.8). Ordinary text and code repeat at most about 0.3 of them."""
LOOP_MAX_PERIOD = 256
"""The longest loop period, in characters, that the periodic-end rule looks for."""
LOOP_END_REPEATS = 4
LOOP_END_CHARS = 192
"""A text whose end repeats one piece of at most LOOP_MAX_PERIOD characters exactly, at least
LOOP_END_REPEATS times over at least LOOP_END_CHARS characters, ends in a loop, at any AL and
whatever the answer's length: a loop that starts late covers too little of the last TAIL_CHARS
characters for LOOP_TAIL_SHARE (a real one: one 25-character line repeated over the last 300 of
700 characters repeats 53% of their pieces)."""
GARBLED_Z = 3.0
GOOD_DRAFTER_AL = 2.0
GARBLED_ODD_SHARE = 0.5
MIN_PIECES = 16

QualityFlag = Literal["loop", "garbled"]


@dataclass(frozen=True, slots=True)
class QualityVerdict:
    """One answer's sentinel result with its evidence."""

    request_id: str
    t: float | None
    flag: QualityFlag | None
    tokens: int
    acceptance_length: float
    al_z: float | None
    """(AL - healthy level) / its spread, before this answer (None: too few answers)."""
    repeated_ngram_share: float | None
    """Share of the text's word 4-grams that repeat an earlier one (None: too short)."""
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class QualityView:
    """Sentinel totals and the flagged answers (newest last)."""

    checked: int
    loops: int
    garbled: int
    al_mean: float | None
    al_std: float | None
    flagged: tuple[QualityVerdict, ...]


def repeated_ngram_share(text: str, n: int = NGRAM) -> float | None:
    """1 - distinct/total word n-grams of `text`; None with fewer than MIN_NGRAMS n-grams."""
    words = text.split()
    total = len(words) - n + 1
    if total < MIN_NGRAMS:
        return None
    seen = {tuple(words[i : i + n]) for i in range(total)}
    return 1.0 - len(seen) / total


def tail_repeat_share(text: str, n: int = CHAR_NGRAM, width: int = TAIL_CHARS) -> float | None:
    """1 - distinct/total character n-grams of the text's last `width` characters; None with
    fewer than MIN_TAIL_NGRAMS of them."""
    tail = text[-width:]
    total = len(tail) - n + 1
    if total < MIN_TAIL_NGRAMS:
        return None
    seen = {tail[i : i + n] for i in range(total)}
    return 1.0 - len(seen) / total


def periodic_end(text: str, max_period: int = LOOP_MAX_PERIOD) -> tuple[int, int] | None:
    """(period, length): the longest end of `text` that repeats one piece of `period` characters
    exactly (each character equals the one `period` before it; the last repeat may be cut off),
    with the shortest such period; None when no end repeats a piece at least twice."""
    n = len(text)
    best: tuple[int, int] | None = None
    for period in range(1, min(max_period, n // 2) + 1):
        if text[-1] != text[-1 - period]:
            continue
        # the longest k with text[n-k:] == text[n-k-period : n-period] (monotone in k)
        lo, hi = 1, n - period
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if text[n - mid :] == text[n - mid - period : n - period]:
                lo = mid
            else:
                hi = mid - 1
        length = lo + period
        if length >= 2 * period and (best is None or length > best[1]):
            best = (period, length)
    return best


def odd_piece_share(text: str) -> float | None:
    """Share of the text's whitespace-separated pieces with no letter or digit (symbol soup);
    None with fewer than MIN_PIECES pieces."""
    pieces = text.split()
    if len(pieces) < MIN_PIECES:
        return None
    odd = sum(1 for p in pieces if not any(c.isalnum() for c in p))
    return odd / len(pieces)


class ALStats:
    """Running mean and variance of per-answer AL (Welford)."""

    __slots__ = ("m2", "mean", "n")

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, value: float) -> None:
        if not math.isfinite(value):
            return
        self.n += 1
        d = value - self.mean
        self.mean += d / self.n
        self.m2 += d * (value - self.mean)

    def std(self) -> float | None:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n >= 2 else None

    def z(self, value: float) -> float | None:
        s = self.std()
        if self.n < MIN_HISTORY or s is None:
            return None
        return (value - self.mean) / max(s, 0.05)


class HealthyAL:
    """The healthy AL level: the upper half of the latest HEALTHY_WINDOW unflagged answers."""

    __slots__ = ("recent",)

    def __init__(self) -> None:
        self.recent: deque[float] = deque(maxlen=HEALTHY_WINDOW)

    def add(self, value: float) -> None:
        if math.isfinite(value):
            self.recent.append(value)

    def level(self) -> tuple[float, float] | None:
        """(level, spread), or None with fewer than MIN_HISTORY answers."""
        if len(self.recent) < MIN_HISTORY:
            return None
        values = sorted(self.recent)
        upper = values[len(values) // 2 :]
        level = statistics.median(upper)
        mad = statistics.median(abs(x - level) for x in upper)
        return level, max(1.4826 * mad, MIN_SPREAD)

    def z(self, value: float) -> float | None:
        found = self.level()
        if found is None:
            return None
        level, spread = found
        return (value - level) / spread


def _loop_end(text: str) -> tuple[int, int] | None:
    """The periodic end of `text` when it is long enough to be a loop (LOOP_END_REPEATS,
    LOOP_END_CHARS), else None."""
    end = periodic_end(text[-MAX_TEXT_CHARS:])
    if end is None:
        return None
    period, length = end
    if length < LOOP_END_CHARS or length < LOOP_END_REPEATS * period:
        return None
    return end


def check_answer(
    request_id: str,
    t: float | None,
    text: str,
    tokens: int | None,
    acceptance_length: float | None,
    healthy: HealthyAL,
    n_spec: int | None,
) -> QualityVerdict | None:
    """The sentinel's verdict on one answer (None when there is nothing to judge: no AL, or
    fewer than MIN_TOKENS tokens). Does not update `healthy`; the caller adds the AL after
    (only an unflagged answer's)."""
    if acceptance_length is None or tokens is None or tokens < MIN_TOKENS:
        return None
    found = healthy.level()
    z = healthy.z(acceptance_length)
    share = repeated_ngram_share(text[-MAX_TEXT_CHARS:])
    flag: QualityFlag | None = None
    evidence = ""
    near_ceiling = (
        n_spec is not None and n_spec > 0 and acceptance_length >= LOOP_AL_FRAC * (n_spec + 1)
    )
    high = near_ceiling or (z is not None and z >= LOOP_Z)
    odd = odd_piece_share(text[-MAX_TEXT_CHARS:])
    words = odd is None or odd < GARBLED_ODD_SHARE  # symbol soup is the garbled flag's
    tail = tail_repeat_share(text)
    if share is not None and (
        (high and share >= LOOP_REPEAT_SHARE) or (share >= LOOP_TEXT_SHARE and words)
    ):
        flag = "loop"
        if high:
            ztext = (
                f"z {z:+.1f}"
                if z is not None
                else f"near the K+1={n_spec + 1 if n_spec else 0} ceiling"
            )
            evidence = (
                f"AL {acceptance_length:.2f} ({ztext}) over {tokens} tokens; "
                f"{share:.0%} of its word {NGRAM}-grams repeat"
            )
        else:
            evidence = (
                f"{share:.0%} of its word {NGRAM}-grams repeat over {tokens} tokens "
                f"(the text's own evidence, at AL {acceptance_length:.2f})"
            )
    elif tail is not None and tail >= LOOP_TAIL_SHARE and words:
        flag = "loop"
        evidence = (
            f"its last {TAIL_CHARS} characters repeat {tail:.0%} of their {CHAR_NGRAM}-character "
            f"pieces over {tokens} tokens (the text's own evidence, at AL "
            f"{acceptance_length:.2f})"
        )
    elif (end := _loop_end(text)) is not None and words:
        flag = "loop"
        period, length = end
        evidence = (
            f"its last {length} characters repeat one {period}-character piece "
            f"{length / period:.0f} times over {tokens} tokens (the text's own evidence, at AL "
            f"{acceptance_length:.2f})"
        )
    elif (
        found is not None
        and z is not None
        and found[0] >= GOOD_DRAFTER_AL
        and (z <= -GARBLED_Z or acceptance_length <= 1.0 + GARBLED_NEAR_ONE)
        and odd is not None
        and odd >= GARBLED_ODD_SHARE
    ):
        flag = "garbled"
        evidence = (
            f"AL {acceptance_length:.2f} (z {z:+.1f}) on a drafter whose healthy answers reach "
            f"{found[0]:.2f}, over {tokens} tokens; {odd:.0%} of its text is not words"
        )
    return QualityVerdict(
        request_id=request_id,
        t=t,
        flag=flag,
        tokens=tokens,
        acceptance_length=acceptance_length,
        al_z=z,
        repeated_ngram_share=share,
        evidence=evidence,
    )
