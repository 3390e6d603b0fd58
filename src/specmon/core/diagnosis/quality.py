"""The quality sentinel: answers whose acceptance says the text may be a loop or garbled.

A drafter accepts nearly everything when the target repeats itself, so an answer whose AL is far
above the session's usual (z-score ≥ LOOP_Z, or ≥ LOOP_AL_FRAC of the K+1 ceiling) over many
tokens, AND whose text repeats (share of repeated word n-grams ≥ LOOP_REPEAT_SHARE), is flagged
"loop". An answer whose AL is far below the usual (z ≤ -GARBLED_Z) on a drafter that normally
does well (session mean AL ≥ GOOD_DRAFTER_AL), AND whose text is mostly not words (share of
whitespace-separated pieces without a letter or digit ≥ GARBLED_ODD_SHARE), is flagged "garbled":
the target went somewhere the drafter could not follow (wrong chat template, broken quantisation,
a runaway sampler). Low acceptance alone is not enough: an answer that merely fell to vanilla
speed (the vanilla detector's case) reads normally and is not flagged.

`check_answer` is a pure function called once at an answer's end (off the hot path: it is cheap,
O(text), and a runner may call it in a worker). `ALStats` keeps the session's per-answer AL mean
and variance in three running numbers (Welford), updated after each check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

NGRAM = 4
"""Word n-gram length for the repetition share."""
MIN_NGRAMS = 16
MAX_TEXT_CHARS = 8192
"""The tail of an answer's text that is kept for the check."""
MIN_TOKENS = 128
"""An answer is judged only over at least this many tokens."""
MIN_HISTORY = 8
"""Answers before z-scores are trusted."""
LOOP_Z = 3.0
LOOP_AL_FRAC = 0.9
LOOP_REPEAT_SHARE = 0.5
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
    """(AL - session mean) / session standard deviation, before this answer (None: too few)."""
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


def check_answer(
    request_id: str,
    t: float | None,
    text: str,
    tokens: int | None,
    acceptance_length: float | None,
    stats: ALStats,
    n_spec: int | None,
) -> QualityVerdict | None:
    """The sentinel's verdict on one answer (None when there is nothing to judge: no AL, or
    fewer than MIN_TOKENS tokens). Does not update `stats`; the caller adds the AL after."""
    if acceptance_length is None or tokens is None or tokens < MIN_TOKENS:
        return None
    z = stats.z(acceptance_length)
    share = repeated_ngram_share(text[-MAX_TEXT_CHARS:])
    flag: QualityFlag | None = None
    evidence = ""
    near_ceiling = (
        n_spec is not None and n_spec > 0 and acceptance_length >= LOOP_AL_FRAC * (n_spec + 1)
    )
    if (
        (near_ceiling or (z is not None and z >= LOOP_Z))
        and share is not None
        and share >= LOOP_REPEAT_SHARE
    ):
        flag = "loop"
        ztext = (
            f"z {z:+.1f}"
            if z is not None
            else f"near the K+1={n_spec + 1 if n_spec else 0} ceiling"
        )
        evidence = (
            f"AL {acceptance_length:.2f} ({ztext}) over {tokens} tokens; "
            f"{share:.0%} of its word {NGRAM}-grams repeat"
        )
    elif (
        z is not None
        and z <= -GARBLED_Z
        and stats.mean >= GOOD_DRAFTER_AL
        and (odd := odd_piece_share(text[-MAX_TEXT_CHARS:])) is not None
        and odd >= GARBLED_ODD_SHARE
    ):
        flag = "garbled"
        evidence = (
            f"AL {acceptance_length:.2f} (z {z:+.1f}) on a drafter whose answers average "
            f"{stats.mean:.2f}, over {tokens} tokens; {odd:.0%} of its text is not words"
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
