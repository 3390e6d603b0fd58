"""The speed class of each finished request: ok, transition or vanilla-speed.

A request at 112 tok/s with AL 1.88, between answers at 205 tok/s and answers at 60 tok/s, is
neither "ok" nor at vanilla speed: it is a transition between the two levels the server moves
between (the seeds' cycle: 5 fast, 1 transition, 3 degraded, 1 recovery).

Rule (pure; inputs in, classes out):
1. Levels: the decode speeds of the last `window` ok requests that the quality sentinel did not
   flag (a loop runs far above the fast level and a garbled answer far below it: neither is a
   speed level) are split into a fast and a slow level by the cycle detector's classification
   (`detectors.cycle.classify`: the 1-D two-means split, levels as the medians of the points
   classified fast / degraded, re-estimated until stable; no levels unless the slow level is at
   least 25% below the fast one and the gap is at least 4 robust spreads (1.4826 x MAD) of each
   level), and none unless the two-means split of ALL the window's speeds (the points between
   the levels included) leaves clusters whose medians are SEPARATION robust spreads of either
   apart: answers of varied content at one level spread over ±25% and the classification's
   own test, which sets the middle points aside, split them in two (on 200 runs of 120 such
   speeds, Gaussian with sigma 15%, 24% of runs showed levels at some point; with this test
   11%, 9% needing levels at two answers' ends in a row, step 4). Levels need at least
   `MIN_REQUESTS` such requests, at least `MIN_SLOW` at the slow
   level and at least `MIN_FAST` at the fast level: one answer far from the rest (read in one
   burst, a cached prompt, the first answer of a transition) is an outlier, not a level.
2. With levels H (fast) and L (slow), gap G = H - L and the levels' robust spreads sH and sL,
   a request's decode speed s is
   - fast      when s >= H - reach(sH),
   - slow      when s <= L + reach(sL),
   - between   otherwise,
   where reach(s) = LEVEL_SPREADS·s within G/8..G/2: a level is its median and the answers
   around it, as far as its own spread says (the cycle detector's fixed G/4 called a fast answer
   of a wide fast level a transition, and a transition near a tight slow level slow).
3. Class:
   - vanilla-speed when the vanilla verdict flagged the request (its reasons are kept), or when
     it is at the slow level ("slow_level") and its own acceptance agrees: its AL, when known,
     is below HEALTHY_AL_SHARE of the fast level's AL (the median AL of the answers classed
     fast, when any of them has one);
   - ok, with the reason "slow_healthy_acceptance" (not flagged), when it is at the slow level
     but its AL is at least HEALTHY_AL_SHARE of the fast level's: speculation did not fail on
     it (a real server streams in bursts, or the server was loaded), so it is not "at vanilla
     speed because speculative decoding failed";
   - transition when it is between the levels ("between_levels"; shown only once the answers
     after it show a change of level, step 6);
   - ok otherwise (fast, or no levels in the window).
4. When (session_state): a request is classed at its end when levels exist then and existed
   at the previous request's end (levels that show once and vanish are noise); else it waits
   (unsettled) and is classed against the first levels that do, while it is still among the
   last `window` requests, or settled as ok when it leaves them without levels. A class, once
   settled, does not change, so every screen counts the same badges.
5. Clock (session_state): when the session samples the GPU and the thermal fit of step time on
   1000 / SM clock is usable (core/diagnosis/thermal.py), every speed is taken at the session's
   reference clock (the clock of its first answer): speed x fit(clock) / fit(reference clock).
   A GPU that throttles from 1725 to 1365 MHz slows every answer by a fifth; without this the
   fast level of the cool GPU and that of the hot one made one wide level, and a throttled
   transition (716 tok/s) fell within the slow level's reach (slow answers at 480 and 380).
   Without GPU samples, or while the fit is not usable (fewer than 5 answers, clocks within 3%),
   the scale is 1.
6. Change of level and neighbours (session_state): an answer between the levels (step 3) is
   a transition only at a change of level, the engine's state changing: the nearest answer
   before it at a level (fast or slow, against the levels that called it between; answers
   between the levels passed over) and the nearest after it at a level are at different
   levels. Until an answer after it is at a level it is shown ok with the reason
   "between_levels_waiting" (unsettled); it is then a transition, or ok with the reason
   "no_change_of_level" (settled) when both are at the same level, when none before it is, or
   when none of the NEIGHBOURS_AFTER = 3 answers after it is. On a real engine with a learned
   drafter an answer's speed follows its own acceptance, which varies with its text: a
   memorised answer at AL 2.33 and 211 tok/s, after answers at AL 3.4-5.0 and 270-406 tok/s
   over a slow level of 109, sat between the levels and was badged TRANSITION, though the
   engine did not change (docs/diagnosis.md, real-gpu-dflash-k7-classes). Its own numbers
   cannot tell it from a transition: the simulator's transition is an answer whose acceptance
   is scaled down throughout, so its AL, too, lies between the levels' in proportion to its
   speed; what tells them apart is what comes before and after it.
   A transition is settled when the NEIGHBOURS_AFTER answers after it are known: it is then
   classed among its neighbours, the cycle detector's classification of the last 11 known
   speeds (`cycle.local_class`: 7 before it, its own and the 3 after; fewer before near the
   session's start), and becomes ok with the reason "fast_among_neighbours" when it is fast
   there; else it stays a transition. The session's levels span its last 40 answers: when
   acceptance falls as the context grows (the fast level of the corpus's context-cycle slid
   from 1,640 to 800 tok/s over a slow level of 480), the fast answers of the slide sit
   between those levels and were badged TRANSITION, 3 of them not within one answer of a
   change of state; among their neighbours they are fast. Three answers after it, not the
   cycle detector's five either side: with five, a recording's last transition (4 answers
   before its end in the seeds' cycle) stayed unsettled and the exporter counted one fewer.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from specmon.core.detectors import cycle
from specmon.core.views import SpeedClassView, VanillaView

DEFAULT_WINDOW = 40
"""How many of the most recent ok requests define the levels."""
MIN_REQUESTS = 4
"""Ok requests with a decode speed needed before levels are estimated (cycle.classify's own)."""
SEPARATION = 5.0
"""The levels' medians, split over all the window's speeds, are at least this many robust
spreads (1.4826 x MAD) of either cluster apart."""
LEVEL_SPREADS = 3.0
"""A level reaches this many of its robust spreads from its median (at least an eighth of the
gap, at most half of it). The fast answers of a chat vary by ±15% with their content: one at
150 tok/s and AL 3.1 among answers at 190-240 is a fast answer, not a transition (a fixed
quarter of the gap, 169, called it one). The slow level of a degraded server is tight (60 tok/s
± 1): an answer at 787 tok/s and AL 1.7 over a slow level of 480 ± 3 is a transition, not at
the slow level (a quarter of the gap, 803, put it there)."""
MIN_FAST = 2
"""Requests needed at the fast level for it to be a level."""
MIN_SLOW = 3
"""Requests needed at the slow level for it to be a level. One slow answer may be the first of
a transition (r6 of the seeds' cycle, 112 tok/s between 205 and 60, is one), and two pass the
separation test whatever they are (103 and 59 tok/s under 221: two points' robust spread is half
their difference): with fewer, the rows wait (step 4) and are classed once the level is seen."""

NEIGHBOURS_AFTER = 3
"""Answers after a transition that are known before it is judged among its neighbours (step 6):
enough for a slid fast level to show after it, few enough that a recording's last transition
(4 answers before its end in the seeds' cycle) is judged and counted on every screen."""

WAITING = "between_levels_waiting"
"""The reason of a between-levels answer shown ok while the answers after it are not at a level
yet (step 6)."""

HEALTHY_AL_SHARE = 0.7
"""An answer whose AL is at least this share of the fast level's AL has healthy acceptance (the
ground truth's line for an engine "at least 30% below its healthy AL" is the same 0.7): it is
not at vanilla speed because speculation failed, whatever its tok/s."""


@dataclass(frozen=True, slots=True)
class SpeedLevels:
    """The recent fast and slow decode-speed levels (tok/s) and the class thresholds."""

    fast_tok_s: float
    slow_tok_s: float
    fast_spread: float = 0.0
    """Robust spread (1.4826 x MAD) of the answers at the fast level."""
    slow_spread: float = 0.0
    fast_al: float | None = None
    """Median acceptance length of the answers classed fast (None: none of them had one)."""

    @property
    def fast_at(self) -> float:
        """H less LEVEL_SPREADS spreads of the fast level, within G/8..G/2."""
        return self.fast_tok_s - _reach(self.fast_spread, self.fast_tok_s - self.slow_tok_s)

    @property
    def slow_at(self) -> float:
        """L plus LEVEL_SPREADS spreads of the slow level, within G/8..G/2."""
        return self.slow_tok_s + _reach(self.slow_spread, self.fast_tok_s - self.slow_tok_s)


def _reach(spread: float, gap: float) -> float:
    """How far a level reaches from its median: LEVEL_SPREADS of its robust spreads, at least
    an eighth of the gap (a level of identical speeds still holds its near neighbours) and at
    most half of it (the levels never overlap)."""
    return min(max(LEVEL_SPREADS * spread, gap / 8), gap / 2)


def speed_levels(
    speeds: Sequence[float | None],
    *,
    window: int = DEFAULT_WINDOW,
    als: Sequence[float | None] | None = None,
) -> SpeedLevels | None:
    """The fast and slow levels of the last `window` speeds (None entries, answers the quality
    sentinel flagged, are left out); None when they are not two levels. `als` (aligned with
    `speeds`; None entries unknown) gives the fast level its AL."""
    pairs = [
        (float(s), als[i] if als is not None and i < len(als) else None)
        for i, s in enumerate(speeds)
        if s is not None
    ]
    pairs = pairs[-window:] if window > 0 else []
    recent = [s for s, _ in pairs]
    if len(recent) < MIN_REQUESTS:
        return None
    if not _apart(recent):  # one wide level, not two
        return None
    classes = cycle.classify(recent)
    if classes is None:
        return None
    fast = [s for s, c in zip(recent, classes, strict=True) if c == cycle.FAST]
    slow = [s for s, c in zip(recent, classes, strict=True) if c == cycle.DEGRADED]
    if len(fast) < MIN_FAST or len(slow) < MIN_SLOW:
        return None
    fast_als = [
        al
        for (_, al), c in zip(pairs, classes, strict=True)
        if c == cycle.FAST and al is not None and math.isfinite(al)
    ]
    return SpeedLevels(
        statistics.median(fast),
        statistics.median(slow),
        cycle.robust_sigma(fast),
        cycle.robust_sigma(slow),
        statistics.median(fast_als) if fast_als else None,
    )


def among_neighbours(view: SpeedClassView, speeds: Sequence[float], at: int) -> SpeedClassView:
    """Step 6: a transition re-judged among its neighbours, `speeds[at]` being its own speed
    (the known speeds at the reference clock, those after it included): ok, with the
    reason "fast_among_neighbours", when the cycle detector's class among the points around it
    (`cycle.local_class`) is fast; else the view unchanged."""
    if view.kind != "transition" or not 0 <= at < len(speeds):
        return view
    if cycle.local_class(speeds, at) != cycle.FAST:
        return view
    sentence = (
        "fast among its neighbours: between the session's levels, but at the fast level of the"
        " answers around it (the fast level drifts)"
    )
    return SpeedClassView(
        "ok", (("fast_among_neighbours", sentence),), view.fast_level_tok_s, view.slow_level_tok_s
    )


def level_of(speed: float, levels: SpeedLevels) -> str | None:
    """The level a speed (at the reference clock) sits at: cycle.FAST, cycle.DEGRADED (the slow
    level) or None (between them)."""
    if speed >= levels.fast_at:
        return cycle.FAST
    if speed <= levels.slow_at:
        return cycle.DEGRADED
    return None


def waiting(view: SpeedClassView) -> SpeedClassView:
    """Step 6: a transition while no answer after it is at a level yet: shown ok, with the
    reason "between_levels_waiting" (its own sentence kept), until the answers after it say
    whether the level changed there; any other view unchanged."""
    if view.kind != "transition":
        return view
    sentence = "; ".join(text for _, text in view.reasons)
    sentence += "; a transition only if the answers after it are at the other level"
    return SpeedClassView(
        "ok", ((WAITING, sentence),), view.fast_level_tok_s, view.slow_level_tok_s
    )


def at_change_of_level(
    view: SpeedClassView, speeds: Sequence[float], at: int, levels: SpeedLevels
) -> SpeedClassView | None:
    """Step 6: a transition (`view`, `speeds[at]` its own speed among the known speeds at the
    reference clock, `levels` those that called it between) stays one only at a change of
    level: the nearest answer before it at a level (within the last DEFAULT_WINDOW) and the
    nearest after it at a level are at different levels. Ok, with the reason
    "no_change_of_level", when they are at the same level, when none before it is, or when none
    of the NEIGHBOURS_AFTER answers after it is; None while that is not known yet (it waits).
    Any other view is returned unchanged."""
    if view.kind != "transition" or not 0 <= at < len(speeds):
        return view
    before = next(
        (
            lv
            for s in reversed(speeds[max(0, at - DEFAULT_WINDOW) : at])
            if (lv := level_of(s, levels)) is not None
        ),
        None,
    )
    after = next((lv for s in speeds[at + 1 :] if (lv := level_of(s, levels)) is not None), None)
    if after is None and len(speeds) - 1 - at < NEIGHBOURS_AFTER:
        return None
    if before is not None and after is not None and before != after:
        return view
    if after is None:
        why = f"none of the {NEIGHBOURS_AFTER} answers after it reached a level"
    elif before is None:
        why = "no answer before it was at a level"
    else:
        name = "fast" if after == cycle.FAST else "slow"
        why = f"the answers before and after it are at the {name} level"
    fast, slow = view.fast_level_tok_s, view.slow_level_tok_s
    told = f" (fast ≈{fast:.0f}, slow ≈{slow:.0f} tok/s)" if fast and slow else ""
    sentence = (
        f"no change of level: between the recent levels{told}, but {why}: the answer's own"
        " text made it slower or faster, not a change of the engine's state"
    )
    return SpeedClassView(
        "ok", (("no_change_of_level", sentence),), view.fast_level_tok_s, view.slow_level_tok_s
    )


def _apart(speeds: Sequence[float]) -> bool:
    """Whether the two-means split of ALL the speeds leaves two clusters whose medians are at
    least SEPARATION robust spreads of either apart. The cycle's classification measures each
    level's spread after the points between the levels are set aside, which narrows the levels
    of one wide level (answers of varied length and content, 180-290 tok/s) until they pass;
    here the middle points count, so only speeds that really sit at two levels do."""
    ordered = sorted(speeds)
    k = cycle.two_means_split(ordered)
    low, high = ordered[:k], ordered[k:]
    gap = statistics.median(high) - statistics.median(low)
    spread = max(cycle.robust_sigma(low), cycle.robust_sigma(high))
    return gap > 0 and gap >= SEPARATION * spread


def speed_class(
    decode_tok_s: float | None,
    vanilla: VanillaView | None,
    levels: SpeedLevels | None,
    *,
    clock_scale: float = 1.0,
    al: float | None = None,
) -> SpeedClassView | None:
    """The class of one finished ok request (None without a decode speed or a verdict).

    `clock_scale` turns the request's speed into a speed at the session's reference GPU clock,
    the clock the levels are kept at (step 5 of the module text): the request is classed at
    `decode_tok_s * clock_scale`, and its view states its own speed and the levels at its own
    clock (the levels / clock_scale). 1.0 when the clock is not known or does not explain
    step time."""
    scale = clock_scale if math.isfinite(clock_scale) and clock_scale > 0 else 1.0
    fast = levels.fast_tok_s / scale if levels else None
    slow = levels.slow_tok_s / scale if levels else None
    if vanilla is not None and vanilla.flagged:
        return SpeedClassView("vanilla-speed", vanilla.reasons, fast, slow)
    if decode_tok_s is None:
        return None
    if levels is not None and fast is not None and slow is not None:
        s = decode_tok_s
        if s * scale <= levels.slow_at:
            fast_al = levels.fast_al
            if al is not None and fast_al is not None and al >= HEALTHY_AL_SHARE * fast_al:
                sentence = (
                    f"slow with healthy acceptance: {s:.0f} tok/s at the recent slow level"
                    f" (≈{slow:.0f}), but AL {al:.2f} against the fast answers' {fast_al:.2f}:"
                    " speculation worked; load or a bursty stream, not vanilla speed"
                )
                return SpeedClassView("ok", (("slow_healthy_acceptance", sentence),), fast, slow)
            sentence = (
                f"at the recent slow level: {s:.0f} tok/s, slow requests ≈{slow:.0f}"
                f" against fast ones ≈{fast:.0f} tok/s"
            )
            return SpeedClassView("vanilla-speed", (("slow_level", sentence),), fast, slow)
        if s * scale < levels.fast_at:
            sentence = (
                f"between the recent levels: {s:.0f} tok/s, between fast ≈"
                f"{fast:.0f} and slow ≈{slow:.0f} tok/s"
            )
            return SpeedClassView("transition", (("between_levels", sentence),), fast, slow)
    return SpeedClassView("ok", (), fast, slow)
