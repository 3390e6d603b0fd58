"""Recurring degradation over a sequence of per-request speeds (the seeds' "5 fast, 1 transition,
3 degraded, 1 recovery, every 9-10 requests").

Method:
1. Split the speeds into a high and a low cluster (the 1-D two-means split with least squared
   error). Levels H and L are the clusters' medians. There is no cycle unless the low level is at
   least `min_drop` below the high one AND the gap is at least `min_separation` times the robust
   spread (1.4826·MAD) of the points classified fast or degraded: one noisy level is not two.
2. Classify each point: fast (≥ H - ¼·gap), degraded (≤ L + ¼·gap), else transition, then
   re-estimate H and L from the points so classified until stable. A fast point right after a
   non-fast one is a recovery.
3. Exact period p (2 ≤ p ≤ n/3, or longer while three episode starts fit after the first start
   seen, s + 2p < n: at least three cycles or three episodes must be seen): the Jaccard agreement
   of the episode indicator (points inside a degradation episode as in 4, not joined: a run of
   transition points alone is a slowish fast request, not part of the pattern) with itself
   shifted by p (both / either). The smallest p within 0.05 of the best score, when that is at
   least `min_score`, and when the sequence has at least three such runs and at least n // p - 1
   of them (about one per period: a long slow stretch agrees with itself shifted by 2, but it is
   one episode; without this check random walks of 100-200 speeds were reported as "period 2"
   cycles 20% of the time).
4. Spacing that varies (the seed's "every 9-10 requests"): degradation episodes are runs of
   non-fast points holding a degraded one (transition-only runs are noise in the fast phase),
   joined across a single fast point (one lucky request inside a degraded phase). The episodes
   whose start was seen (not cut by the window's start) recur when a chain of them
   - has at least MIN_SPACED_EPISODES = 4 episodes (three spacings: with three episodes, two
     spacings agree by chance too often: 0.59% false positives on the aperiodic set below,
     over the bound, and 0.39% on isolated dips);
   - has spacings within low..low + max_spread(low): a spread of 1 request, or 2 from a shortest
     spacing of 8 on (at most a quarter of it), and low is at least MIN_SPACED_PERIOD = 4 (a
     spread of 2 on short periods is what random dips look like: the false-positive rate was
     0.40%, not 0.12%, with a spread of 2 everywhere);
   - leaves out no episode, or at most one in STRAY_EPISODES_PER = 10 (a one-off dip in a fast
     phase; with fewer than 10 episodes none), the stray episodes being reported apart;
   - covers the window: no stretch before its first start, or from its last start to the end
     (transitions that end the window begin an episode), longer than the longest spacing
     allowed (a recurring episode would have appeared in it);
   - and its episodes' degraded counts differ by no more than the spread.
   When both 3 and 4 apply and the exact period lies in the spacing's range, the exact period is
   the period and the counts are taken as in 5; else the period is the rounded mean spacing and
   the counts are over the complete cycles between the first and the last start of the chain. The
   range (period_min, period_max, period_mean) comes from the chain whenever there is one, else it
   is the exact period.
Missing points (None: an answer the quality sentinel flagged as a loop or garbled, whose speed
says nothing of the server's state) keep their place in the sequence, so the period is counted in
requests: they take no part in the levels, and each takes the class of its neighbours when both
agree, else fast (a boundary between phases, or either end of the sequence). That class is a
guess: the exact period's agreement (3) leaves out every pair holding a missing point (a loop in
the transition phase of a period-7 cycle made its episode start one request late, 0.83 < 0.9).
5. Counts per cycle over the complete cycles; fast-phase mean (fast points, recoveries excluded);
   long-run mean (all points); share degraded (degraded points / all points).
6. A fast level that drifts: when the speeds form two levels (1) but 3 and 4 find no cycle, each
   point is classed again among its neighbours, the LOCAL_REACH = 5 points either side of it
   (near either end, the first or last 11 points: a window cut short by the end made a
   transition that ends the sequence look degraded): `classify` over those 11 points, the
   point's own class taken (fast when they are not two levels), and 3-5 run on these classes.
   Acceptance that falls as the context grows halved the fast level over 40 answers of a
   period-10 cycle (1,640 to 800 tok/s over a steady degraded 480): over the whole sequence the
   late fast answers sit between the levels, the episodes ran together and no period was found;
   among its neighbours each fast phase is fast again (period 10). Only when the whole sequence
   holds two levels: on iid Gaussian speeds (one level) it found cycles in noise.

False positives (benchmarks/cycle_detection.py, generators in tests/support/cycle_sequences.py;
2026-11-23, x86-64, 2 cores): on 20,000 aperiodic sequences of 20-60 speeds, a quarter each of
iid two-level speeds (degraded with probability 0.1-0.5, noise up to 10%), iid Gaussian (sigma
1-40%), random walks (step sigma 10%) and single step changes, 0.12% reported a cycle (24; the
exact-period detector before: 0.14%). By kind: iid two-level 0.32% (was 0), iid Gaussian 0.16%
(unchanged), random walks 0 (was 0.41%), step changes 0. The same kinds at 100-200 speeds (the
session's window holds 200): 0 of 4,000 (before: 189, nearly all random walks). Steady speeds with
random one-off slow requests (2-15% of 20-200 requests): 0.045% (9 of 20,000); 0.060% (12) since
the exact period looks at episodes and may pass n/3 (2026-11-28). With step 6 (2026-11-28,
benchmarks/results/cycle_detection-2026-11-28.txt): 0.175% on the 20,000 aperiodic sequences (35:
iid two-level 0.36%, iid Gaussian 0.30%, random walks 0.04%, step changes 0), isolated dips
0.12% (24), 0 of the 4,000 of 100-200 speeds, the jittered cycles 5,000 of 5,000 as before; step
6 on every sequence, not only those with two levels (and windows cut short at either end), gave
0.23%. The bound the tests assert is FALSE_POSITIVE_BOUND = 0.5%.
Detection is exact (period and counts) when the noise stays within 8% of the gap between the
levels and at least three cycles are seen (property test); it also finds the cycle when the fast
phase itself varies by ±15% from request to request, as answers of different content do
(test_the_simulated_demo_sequence). With a varying spacing (property test: shortest spacing
5-15, spread as above, 5-8 cycles, fast phase up to ±15% and 18% of the gap, degraded phase 8%
of the gap, any phase) the period range and the episode count are the generated ones: 5,000 of
5,000 in the benchmark; in windows of 200 such requests with one stray dip, 5,000 of 5,000. A
stricter separation (8 spreads, score 0.8) missed the demo case; 4 spreads with a period score
of at least 0.9 keeps the false-positive rate lower than before.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

FALSE_POSITIVE_BOUND = 0.005
"""Share of aperiodic sequences (see module doc) on which a cycle is reported, at most."""

MIN_SPACED_EPISODES = 4
"""Episodes whose start was seen that a cycle with varying spacing needs (three spacings)."""
MAX_PERIOD_SPREAD = 2
"""Largest difference, in requests, between the longest and the shortest spacing of a cycle."""
MIN_SPACED_PERIOD = 4
"""Shortest spacing of a cycle with varying spacing (a spread of 2 on a period of 3 is no cycle)."""
STRAY_EPISODES_PER = 10
"""A cycle with varying spacing may leave out one episode in this many seen (a one-off dip between
two of its episodes): none below 10 episodes, one from 10 to 19, ..."""

LOCAL_REACH = 5
"""Neighbours either side of a point that classify it when the whole sequence shows no cycle
(step 6): 11 points hold one episode of a period-10 cycle and the fast points around it."""

FAST, TRANSITION, DEGRADED = "fast", "transition", "degraded"


@dataclass(frozen=True, slots=True)
class CycleReport:
    """A recurring degradation found in a sequence of speeds."""

    period: int
    """The period: the one the pattern repeats with, or the rounded mean spacing of the episodes."""
    cycles: int
    """Complete cycles observed."""
    transitions_per_cycle: float
    degraded_per_cycle: float
    recoveries_per_cycle: float
    fast_per_cycle: float
    fast_mean: float
    """Mean of the fast points, recoveries excluded: the peak the user gets when it works."""
    degraded_mean: float | None
    long_run_mean: float
    share_degraded: float
    score: float
    """Agreement of the pattern with itself one cycle later (1.0 = exact repetition)."""
    classes: tuple[str, ...]
    period_min: int
    """Shortest spacing (requests) between the starts of the cycle's consecutive degradation
    episodes; the exact period when no spacing was measured."""
    period_max: int
    """Longest spacing; equal to period_min when the cycle is exactly periodic."""
    period_mean: float
    """Mean spacing between the cycle's episode starts."""
    episodes: int
    """Degradation episodes of the cycle seen, including those cut off by either end of the
    sequence (stray ones left out)."""
    stray_episodes: int
    """One-off degradation episodes between two of the cycle's, left out of its spacing."""

    @property
    def period_text(self) -> str:
        """The period in words: "every 10 requests", or "every 9-10 requests" when it varies."""
        if self.period_min == self.period_max:
            return f"every {self.period_min} requests"
        return f"every {self.period_min}-{self.period_max} requests"


def two_means_split(sorted_xs: Sequence[float]) -> int:
    """k such that sorted_xs[:k] (low) and sorted_xs[k:] (high) have the least squared error."""
    n = len(sorted_xs)
    prefix = [0.0]
    prefix_sq = [0.0]
    for x in sorted_xs:
        prefix.append(prefix[-1] + x)
        prefix_sq.append(prefix_sq[-1] + x * x)
    best_k, best_sse = 1, math.inf
    for k in range(1, n):
        lo_n, hi_n = k, n - k
        lo_s, hi_s = prefix[k], prefix[n] - prefix[k]
        sse = (prefix_sq[k] - lo_s * lo_s / lo_n) + (
            prefix_sq[n] - prefix_sq[k] - hi_s * hi_s / hi_n
        )
        if sse < best_sse:
            best_k, best_sse = k, sse
    return best_k


def _median(xs: list[float]) -> float:
    """statistics.median of a non-empty list, without its generality (the refinement's hot loop)."""
    xs.sort()
    n = len(xs)
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


def robust_sigma(xs: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: the standard deviation of normal data, robust."""
    med = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - med) for x in xs)


def classify(
    speeds: Sequence[float], *, min_drop: float = 0.25, min_separation: float = 4.0
) -> tuple[str, ...] | None:
    """Fast / transition / degraded per point; None when the speeds do not form two levels."""
    xs = [float(x) for x in speeds]
    if len(xs) < 4 or not all(math.isfinite(x) for x in xs):
        return None
    ordered = sorted(xs)
    k = two_means_split(ordered)
    low, high = ordered[:k], ordered[k:]
    classes = _refined(
        xs, statistics.median(low), statistics.median(high), min_drop, min_separation
    )
    if classes is None and len(low) >= 2:
        # Transition points just above the middle can pull the low cluster's median up to them,
        # and the refinement then keeps them as degraded (one wide "level"): start again from
        # the lower half of the low cluster, the deepest points, where the degraded level is.
        deep = statistics.median(low[: (len(low) + 1) // 2])
        classes = _refined(xs, deep, statistics.median(high), min_drop, min_separation)
    return classes


def _refined(
    xs: list[float], lo_level: float, hi_level: float, min_drop: float, min_separation: float
) -> tuple[str, ...] | None:
    """`classify` from starting levels: points classed by the levels, the levels re-estimated
    from the classed points until they settle; None when they are not two separate levels."""
    gap = hi_level - lo_level
    # The first split may put transition points into the low cluster and understate the drop, so
    # the min_drop test waits until the levels are re-estimated from classified points.
    if hi_level <= 0 or gap <= 0:
        return None
    classes: tuple[str, ...] = ()
    for _ in range(5):  # refine: levels from the points classified fast / degraded
        fast_at, degraded_at = hi_level - gap / 4, lo_level + gap / 4
        new = tuple(
            FAST if x >= fast_at else DEGRADED if x <= degraded_at else TRANSITION for x in xs
        )
        if new == classes:
            break
        classes = new
        hi_level = _median([x for x in xs if x >= fast_at])
        lo_level = _median([x for x in xs if x <= degraded_at])
        gap = hi_level - lo_level
        if gap <= 0:
            return None
    if gap / hi_level < min_drop:
        return None
    # Two levels, not one noisy level: the gap must dwarf the spread within each level
    # (transition points sit between the levels and are left out of the spread).
    spread = 0.0
    for level in (FAST, DEGRADED):
        members = [x for x, c in zip(xs, classes, strict=True) if c == level]
        if len(members) > 1:
            spread = max(spread, robust_sigma(members))
    if spread > 0 and gap < min_separation * spread:
        return None
    return classes


@dataclass(frozen=True, slots=True)
class Episode:
    """A degradation episode: a maximal run of non-fast requests holding at least one degraded
    one. `end` is exclusive."""

    start: int
    end: int


def degradation_episodes(classes: Sequence[str], *, join: bool = False) -> tuple[Episode, ...]:
    """The degradation episodes in classified points, oldest first: runs of non-fast points
    holding at least one degraded point. Runs of transition points alone (a fast request that
    came out a little slow) are not episodes. With `join`, two runs with a single fast point
    between them are one episode (one lucky request inside a degraded phase)."""
    runs: list[list[int]] = []  # [start, end) of non-fast runs
    for i, c in enumerate(classes):
        if c == FAST:
            continue
        if runs and i - runs[-1][1] <= (1 if join else 0):
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return tuple(Episode(a, b) for a, b in runs if DEGRADED in classes[a:b])


def _nonfast_runs(bad: Sequence[bool]) -> int:
    return sum(1 for i, b in enumerate(bad) if b and (i == 0 or not bad[i - 1]))


def _shift_agreement(
    bad: Sequence[bool], p: int, missing: Sequence[bool] | None = None
) -> float | None:
    """Both / either of the pattern and itself shifted by p, over the pairs without a missing
    point (its class is a guess: it says nothing for or against the period)."""
    both = either = 0
    for i in range(len(bad) - p):
        if missing is not None and (missing[i] or missing[i + p]):
            continue
        a, b = bad[i], bad[i + p]
        both += a and b
        either += a or b
    return both / either if either else None


def _exact_period(
    bad: Sequence[bool], min_score: float, missing: Sequence[bool] | None = None
) -> tuple[int, float] | None:
    """(period, agreement) of the non-fast pattern repeating with one period, or None.

    A period p needs about one non-fast run per p points (at least n // p - 1 runs): a long slow
    stretch agrees with itself shifted by a little, but it is one episode, not a cycle. The
    longest period tried is n // 3, or longer when three of its episodes' starts fit after the
    first start seen (a start at s, s + p and s + 2p < n: 27 answers of a period-10 cycle whose
    first episode starts at answer 2 show three)."""
    runs = _nonfast_runs(bad)
    if runs < 3:
        return None
    first = next((i for i in range(1, len(bad)) if bad[i] and not bad[i - 1]), len(bad))
    longest = max(len(bad) // 3, (len(bad) - 1 - first) // 2)
    scores: dict[int, float] = {}
    for p in range(2, longest + 1):
        if len(bad) // p > runs + 1:
            continue
        s = _shift_agreement(bad, p, missing)
        if s is not None:
            scores[p] = s
    if not scores:
        return None
    best = max(scores.values())
    if best < min_score:
        return None
    period = min(p for p, s in scores.items() if s >= best - 0.05 and s >= min_score)
    return period, scores[period]


@dataclass(frozen=True, slots=True)
class _Spacing:
    starts: tuple[int, ...]
    """Starts of the episodes that make up the cycle (an episode at index 0 may have begun before
    the window and is not among them)."""
    score: float
    strays: int
    """Episodes left out of the cycle: one-off dips between two of its episodes."""

    @property
    def periods(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in itertools.pairwise(self.starts))

    @property
    def low(self) -> int:
        return min(self.periods)

    @property
    def high(self) -> int:
        return max(self.periods)


def _aligned_agreement(bad: Sequence[bool], starts: Sequence[int]) -> float:
    """Agreement of each cycle's non-fast pattern with the next one's, both aligned at their
    episode's start, over the shorter of the two (both non-fast / either non-fast)."""
    both = either = 0
    for a, b, c in zip(starts, starts[1:], starts[2:], strict=False):
        for i in range(min(b - a, c - b)):
            x, y = bad[a + i], bad[b + i]
            both += x and y
            either += x or y
    return both / either if either else 0.0


def max_spread(period_min: int) -> int:
    """How much longer than the shortest spacing the longest may be: MAX_PERIOD_SPREAD requests,
    and at most a quarter of the shortest (but always 1)."""
    return max(1, min(MAX_PERIOD_SPREAD, period_min // 4))


def _regular_spacing(classes: Sequence[str], episodes: Sequence[Episode]) -> _Spacing | None:
    """The episodes recur with a spacing that varies by at most max_spread requests, all of them
    or all but one in STRAY_EPISODES_PER."""
    n = len(classes)
    seen = [e for e in episodes if e.start > 0]
    if len(seen) < MIN_SPACED_EPISODES:
        return None
    # Transitions that end the window begin an episode whose degraded part is still to come.
    end = n
    while end > 0 and classes[end - 1] == TRANSITION:
        end -= 1
    best: list[Episode] | None = None
    for low in _candidate_spacings([e.start for e in seen]):
        chain = _chain(seen, end, low, len(seen) // STRAY_EPISODES_PER)
        if chain is not None and (best is None or len(chain) > len(best)):
            best = chain
    if best is None or len(best) < MIN_SPACED_EPISODES:
        return None
    starts = tuple(e.start for e in best)
    spread = max_spread(min(b - a for a, b in itertools.pairwise(starts)))
    degraded = [classes[e.start : e.end].count(DEGRADED) for e in best if e.end < n]
    if degraded and max(degraded) - min(degraded) > spread:
        return None
    bad = [c != FAST for c in classes]
    return _Spacing(
        starts=starts, score=_aligned_agreement(bad, starts), strays=len(seen) - len(best)
    )


def _candidate_spacings(starts: Sequence[int]) -> list[int]:
    """Shortest spacings worth trying: each spacing between consecutive starts, and between
    starts two apart (a stray episode splits one spacing in two)."""
    out = {b - a for a, b in itertools.pairwise(starts)}
    out |= {c - a for a, c in zip(starts, starts[2:], strict=False)}
    return sorted(x for x in out if x >= MIN_SPACED_PERIOD)


def _chain(seen: Sequence[Episode], end: int, low: int, strays: int) -> list[Episode] | None:
    """The episodes (in order) whose consecutive starts are low..low + max_spread(low) apart,
    leaving out at most `strays` of the others, covering the window up to `end`: no stretch
    before the first start or from the last start to `end` longer than the longest spacing (a
    recurring episode would have appeared in it). None when there is no such chain."""
    longest = low + max_spread(low)
    m = len(seen)
    # left_out[j]: fewest episodes left out by a chain from the window's start to episode j.
    left_out: list[int | None] = [j if seen[j].start <= longest else None for j in range(m)]
    parent: list[int | None] = [None] * m
    for j in range(m):
        for i in range(j - 1, -1, -1):
            gap = seen[j].start - seen[i].start
            if gap > longest:
                break
            prev = left_out[i]
            if gap < low or prev is None:
                continue
            cost = prev + (j - i - 1)
            current = left_out[j]
            if current is None or cost < current:
                left_out[j], parent[j] = cost, i
    ends = [
        (cost + (m - 1 - j), j)
        for j, cost in enumerate(left_out)
        if cost is not None and end - seen[j].start <= longest
    ]
    if not ends:
        return None
    total, j = min(ends)
    if total > strays:
        return None
    chain: list[Episode] = []
    at: int | None = j
    while at is not None:
        chain.append(seen[at])
        at = parent[at]
    return chain[::-1]


def _with_missing(speeds: Sequence[float | None], known: tuple[str, ...]) -> tuple[str, ...]:
    """The classes of every point: the known points' own, a missing point its neighbours' class
    when both agree, else fast (between two phases, or at either end)."""
    out: list[str | None] = []
    it = iter(known)
    for x in speeds:
        out.append(None if x is None else next(it))
    filled: list[str] = []
    for i, c in enumerate(out):
        if c is not None:
            filled.append(c)
            continue
        before = next((out[j] for j in range(i - 1, -1, -1) if out[j] is not None), None)
        after = next((out[j] for j in range(i + 1, len(out)) if out[j] is not None), None)
        filled.append(before if before is not None and before == after else FAST)
    return tuple(filled)


def detect_cycle(
    speeds: Sequence[float | None],
    *,
    min_drop: float = 0.25,
    min_separation: float = 4.0,
    min_score: float = 0.9,
) -> CycleReport | None:
    """The recurring degradation in `speeds` (oldest first; None: a missing point, see the
    module text), or None when there is none."""
    known = [x for x in speeds if x is not None]
    known_classes = classify(known, min_drop=min_drop, min_separation=min_separation)
    report = None
    if known_classes is not None:
        report = _from_classes(speeds, _with_missing(speeds, known_classes), min_score)
    if report is None and known_classes is not None and len(known) > 2 * LOCAL_REACH + 1:
        # Two levels, but their episodes do not recur: a fast level that drifts (acceptance
        # falling as the context grows) is not one level over the whole sequence; classify
        # each point among its neighbours (step 6).
        local = local_classes(known, min_drop=min_drop, min_separation=min_separation)
        report = _from_classes(speeds, _with_missing(speeds, local), min_score)
    return report


def local_classes(
    speeds: Sequence[float], *, min_drop: float = 0.25, min_separation: float = 4.0
) -> tuple[str, ...]:
    """Each point's class among its neighbours: `classify` over the 2 x LOCAL_REACH + 1 points
    centred on it (the first or last as many at either end), the point's own class taken; fast
    where they do not form two levels."""
    xs = [float(x) for x in speeds]
    width = min(len(xs), 2 * LOCAL_REACH + 1)
    windows: dict[int, tuple[str, ...] | None] = {}  # the first and last points share a window
    local: list[str] = []
    for i in range(len(xs)):
        a = _window_start(len(xs), width, i)
        if a not in windows:
            windows[a] = classify(
                xs[a : a + width], min_drop=min_drop, min_separation=min_separation
            )
        classes = windows[a]
        local.append(FAST if classes is None else classes[i - a])
    return tuple(local)


def _window_start(n: int, width: int, i: int) -> int:
    """Where point i's window of `width` points among n starts: centred on it, inside the n."""
    return max(0, min(i - LOCAL_REACH, n - width))


def local_class(
    speeds: Sequence[float], i: int, *, min_drop: float = 0.25, min_separation: float = 4.0
) -> str:
    """Point i's class among its neighbours (see `local_classes`)."""
    width = min(len(speeds), 2 * LOCAL_REACH + 1)
    a = _window_start(len(speeds), width, i)
    classes = classify(speeds[a : a + width], min_drop=min_drop, min_separation=min_separation)
    return FAST if classes is None else classes[i - a]


def _from_classes(
    speeds: Sequence[float | None], classes: tuple[str, ...], min_score: float
) -> CycleReport | None:
    """Steps 3-5 on classified points (every point, the missing ones' guessed)."""
    bad = [c != FAST for c in classes]
    if all(bad):
        return None
    episodes = degradation_episodes(classes)
    in_episode = [False] * len(classes)
    for e in episodes:
        in_episode[e.start : e.end] = [True] * (e.end - e.start)
    exact = _exact_period(in_episode, min_score, [x is None for x in speeds])
    episodes = degradation_episodes(classes, join=True)
    spacing = _regular_spacing(classes, episodes)
    if spacing is None:
        # Not spaced regularly; perhaps the fast phase is one request long, which joined the
        # episodes: the exact pattern (if any) counts them apart.
        episodes = degradation_episodes(classes)
    if exact is not None and (spacing is None or spacing.low <= exact[0] <= spacing.high):
        # One period fits the whole pattern: counted over the first cycles * period requests,
        # as when the spacing never varies.
        period, score = exact
        cycles = len(classes) // period
        span = (0, cycles * period)
        periods = spacing.periods if spacing is not None else (period,)
    elif spacing is not None:
        # The spacing varies (a period that fits exactly, if any, spans several episodes):
        # counted over the complete cycles between the first and the last seen episode start.
        periods, score = spacing.periods, spacing.score
        period = round(statistics.fmean(periods))
        cycles = len(periods)
        span = (spacing.starts[0], spacing.starts[-1])
    else:
        return None
    strays = spacing.strays if spacing is not None else 0
    return _report(
        speeds, classes, period, periods, cycles, span, score, len(episodes) - strays, strays
    )


def _report(
    speeds: Sequence[float | None],
    classes: tuple[str, ...],
    period: int,
    periods: Sequence[int],
    cycles: int,
    span: tuple[int, int],
    score: float,
    episodes: int,
    strays: int,
) -> CycleReport:
    xs = [None if x is None else float(x) for x in speeds]
    n = len(xs)
    known = [x for x in xs if x is not None]
    recover = [c == FAST and i > 0 and classes[i - 1] != FAST for i, c in enumerate(classes)]
    counted = classes[span[0] : span[1]]
    recoveries = sum(recover[span[0] : span[1]])
    fast_points = [
        x
        for x, c, r in zip(xs, classes, recover, strict=True)
        if x is not None and c == FAST and not r
    ]
    if not fast_points:
        fast_points = [x for x, c in zip(xs, classes, strict=True) if x is not None and c == FAST]
    degraded_points = [
        x for x, c in zip(xs, classes, strict=True) if x is not None and c == DEGRADED
    ]
    return CycleReport(
        period=period,
        cycles=cycles,
        transitions_per_cycle=counted.count(TRANSITION) / cycles,
        degraded_per_cycle=counted.count(DEGRADED) / cycles,
        recoveries_per_cycle=recoveries / cycles,
        fast_per_cycle=(counted.count(FAST) - recoveries) / cycles,
        fast_mean=math.fsum(fast_points) / len(fast_points),
        degraded_mean=(
            math.fsum(degraded_points) / len(degraded_points) if degraded_points else None
        ),
        long_run_mean=math.fsum(known) / len(known),
        share_degraded=classes.count(DEGRADED) / n,
        score=score,
        classes=classes,
        period_min=min(periods),
        period_max=max(periods),
        period_mean=statistics.fmean(periods),
        episodes=episodes,
        stray_episodes=strays,
    )
