"""What each draft position is worth: expected tokens per step for every smaller n_spec, each
position's share of the accepted tokens, and a hint when the last positions rarely accept.

Input: per-position acceptance rates as vLLM defines them (docs/definitions.md): rate i = the share
of speculative steps whose first i + 1 drafts were all accepted (so rate i never rises with i).
Window rates (`WindowNumbers.per_position_rates`) and since-start rates
(`LifetimeNumbers.per_position_rates`) are both valid inputs; the caller labels which it used.

The maths, for K drafted positions and rates r_0 … r_{K-1}:
- a step that proposes n ≤ K drafts emits 1 + (drafts accepted among the first n) tokens, so the
  expected tokens per step with n_spec = n is E[n] = 1 + Σ_{i<n} r_i (E[0] = 1: plain decoding);
- the accepted tokens per step are Σ_{i<K} r_i, and position i brings r_i / Σ r of them;
- n_spec = n keeps the share Σ_{i<n} r_i / Σ_{i<K} r_i of the accepted tokens.
This assumes that drafting fewer tokens leaves the acceptance of the first n positions unchanged
(true for a drafter that proposes token by token or one block whose prefix does not depend on its
length; a block drafter trained for K may differ a little). It says nothing of the verify cost,
which grows with n_spec: that is what the hint trades against.

Positions in text are numbered from 1 (vLLM's label `position="i"` is position i + 1), so
"positions 9-13" with n_spec 8 means vLLM's positions 8…12, dropped by proposing 8 drafts.

Pure: no I/O. Missing or invalid rates give None, never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specmon.core.views import LifetimeNumbers, ServerView, WindowNumbers

HINT_RATE_THRESHOLD = 0.05
"""A position "rarely accepts" when its rate is below this (5% of steps)."""

HINT_MIN_KEPT_SHARE = 0.90
"""A hint is given only when the smaller n_spec keeps at least this share of the accepted tokens:
dropping positions that together bring more is a real trade, not a free saving."""

HINT_MIN_DRAFTS = 100.0
"""When the number of speculative steps behind the rates is known, fewer than this gives no hint
(a handful of steps says little about rare positions)."""

RATE_TOLERANCE = 1e-9
"""Rates a hair outside 0..1 (float noise of a division) are clipped, further out refused."""


@dataclass(frozen=True, slots=True)
class TrimHint:
    """The last positions rarely accept: proposing `n_spec` drafts keeps most accepted tokens.

    `first_position`..`last_position` are 1-based; `kept_share` is the share of the accepted
    tokens that n_spec keeps; `text` is the sentence to show."""

    first_position: int
    last_position: int
    threshold: float
    n_spec: int
    kept_share: float
    expected_tokens: float
    """Expected tokens per step with `n_spec` drafts (vs `PositionWorth.expected_tokens[-1]`)."""
    text: str


@dataclass(frozen=True, slots=True)
class PositionWorth:
    """The worth of each draft position, from one set of per-position rates.

    Tuples indexed by position (0-based) or by n_spec (0..K):
    - `expected_tokens[n]`: expected tokens per step with n_spec = n (index 0 is 1.0);
    - `share_of_accepted[i]`: the share of the accepted tokens position i brings (None when no
      draft was accepted at all: shares of nothing are undefined);
    - `kept_share[n]`: the share of the accepted tokens that n_spec = n keeps (None likewise).
    """

    rates: tuple[float, ...]
    expected_tokens: tuple[float, ...]
    share_of_accepted: tuple[float, ...] | None
    kept_share: tuple[float, ...] | None
    hint: TrimHint | None
    no_hint: str | None = None
    """Why there is no hint (None when there is one): the gate that stopped it, in words."""

    @property
    def n_spec(self) -> int:
        """K: the number of drafted positions the rates cover."""
        return len(self.rates)

    @property
    def accepted_per_step(self) -> float:
        """Mean accepted drafts per step (the acceptance length minus the bonus token)."""
        return self.expected_tokens[-1] - 1.0


def _clean_rates(rates: Sequence[float] | None) -> tuple[float, ...] | None:
    if rates is None or len(rates) == 0:
        return None
    out: list[float] = []
    for r in rates:
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r):
            return None
        if r < -RATE_TOLERANCE or r > 1.0 + RATE_TOLERANCE:
            return None
        out.append(min(max(float(r), 0.0), 1.0))
    return tuple(out)


def position_range_text(first: int, last: int) -> str:
    """ "position 9" or "positions 9-13" (1-based)."""
    return f"position {first}" if first == last else f"positions {first}-{last}"


def _hint(
    rates: tuple[float, ...],
    expected: tuple[float, ...],
    kept: tuple[float, ...] | None,
    drafts: float | None,
    threshold: float,
    min_kept_share: float,
) -> TrimHint | str:
    """The smallest n ≥ 1 such that every position from n on accepts less than `threshold`,
    when dropping those positions keeps at least `min_kept_share` of the accepted tokens; else
    why there is none (the gate that stopped it, one sentence)."""
    pct = f"{threshold * 100:.0f}%"
    if kept is None:
        # nothing accepted: the vanilla-speed flag speaks, not a trim hint
        return "no draft was accepted at all (no position to keep)"
    if drafts is not None and drafts < HINT_MIN_DRAFTS:
        return (
            f"only {drafts:.0f} speculative steps since start, fewer than "
            f"{HINT_MIN_DRAFTS:.0f} to judge rare positions"
        )
    k = len(rates)
    n = k
    while n > 0 and rates[n - 1] < threshold:
        n -= 1
    if n == k:
        return f"every position pulls its weight (the last, position {k}, accepts ≥ {pct})"
    if n == 0:
        return f"even position 1 accepts < {pct} (no n_spec ≥ 1 helps; see the vanilla flag)"
    share = kept[n]
    first, last = n + 1, k
    if share < min_kept_share:
        # Floor, as below: never claim more than was measured.
        kept_pct = math.floor(share * 100 + 1e-9)
        verb = "accepts" if first == last else "each accept"
        return (
            f"{position_range_text(first, last)} {verb} < {pct}, but n_spec {n} would keep only "
            f"{kept_pct}% of the accepted tokens (a hint needs {min_kept_share * 100:.0f}%): "
            "together they bring too much to drop"
        )
    # Floor, so the sentence never claims more than was measured (0.996 reads 99%, not 100%).
    kept_pct = math.floor(share * 100 + 1e-9)
    verb = "accepts" if first == last else "accept"
    text = (
        f"{position_range_text(first, last)} {verb} < {pct}: n_spec {n} keeps "
        f"{kept_pct}% of the accepted tokens at lower verify cost"
    )
    return TrimHint(
        first_position=first,
        last_position=last,
        threshold=threshold,
        n_spec=n,
        kept_share=share,
        expected_tokens=expected[n],
        text=text,
    )


def position_worth(
    rates: Sequence[float] | None,
    *,
    drafts: float | None = None,
    threshold: float = HINT_RATE_THRESHOLD,
    min_kept_share: float = HINT_MIN_KEPT_SHARE,
) -> PositionWorth | None:
    """The worth of each position from per-position rates (window or since start).

    `drafts`: the number of speculative steps behind the rates, when known (since-start numbers
    have it); below HINT_MIN_DRAFTS no hint is given. None rates, an empty list, or a rate that is
    not a finite number in 0..1 give None.
    """
    clean = _clean_rates(rates)
    if clean is None:
        return None
    accepted = [0.0]  # expected accepted drafts per step for n_spec 0, 1, …, K
    for r in clean:
        accepted.append(accepted[-1] + r)
    expected = [1.0 + a for a in accepted]
    total = accepted[-1]  # summed apart from the 1.0: tiny rates keep their precision
    if total > 0:
        shares: tuple[float, ...] | None = tuple(r / total for r in clean)
        kept: tuple[float, ...] | None = tuple(a / total for a in accepted)
    else:
        shares = kept = None
    expected_t = tuple(expected)
    found = _hint(clean, expected_t, kept, drafts, threshold, min_kept_share)
    return PositionWorth(
        rates=clean,
        expected_tokens=expected_t,
        share_of_accepted=shares,
        kept_share=kept,
        hint=found if isinstance(found, TrimHint) else None,
        no_hint=found if isinstance(found, str) else None,
    )


@dataclass(frozen=True, slots=True)
class ServerPositionWorth:
    """A server's position worth over the window and since start (each None when unknown)."""

    window: PositionWorth | None
    lifetime: PositionWorth | None


def window_worth(window: WindowNumbers) -> PositionWorth | None:
    """Position worth from a server's window numbers (the window's step count is not kept, so the
    hint does not wait for a minimum number of drafts)."""
    return position_worth(window.per_position_rates)


def lifetime_worth(lifetime: LifetimeNumbers | None) -> PositionWorth | None:
    """Position worth from a server's since-start numbers (their draft count gates the hint)."""
    if lifetime is None:
        return None
    return position_worth(lifetime.per_position_rates, drafts=lifetime.drafts)


def server_position_worth(server: ServerView) -> ServerPositionWorth:
    """Both groups for one server view."""
    return ServerPositionWorth(
        window=window_worth(server.window), lifetime=lifetime_worth(server.lifetime)
    )


def no_hint_reason(worth: ServerPositionWorth) -> str:
    """Why neither the since-start nor the window numbers give a trim hint, as one sentence
    naming the numbers each reason comes from (the F8 modal's line)."""
    parts = [
        f"{which}: {w.no_hint}"
        for which, w in (("since start", worth.lifetime), ("window", worth.window))
        if w is not None and w.no_hint is not None
    ]
    if not parts:
        return "No trim hint: no per-position numbers to judge."
    return "No trim hint. " + "; ".join(parts) + "."
