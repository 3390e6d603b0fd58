"""Counter deltas per series with reset detection, and windowed deltas and rates.

A Prometheus counter only grows while its process lives. When a scraped value is LOWER than the
previous one, the server restarted: the series gets a new baseline, a `CounterReset` is reported,
and the increase over that interval is the new value itself (the counter restarted from 0, as in
Prometheus's `increase()`). A delta or rate is therefore never negative.

`CounterBank` keeps, per series, a reset-corrected running total (0 when the series is first seen)
and a time-bounded ring of totals, so the delta over the last W seconds is the difference of two
ring points. Time is the samples' own timestamps (`MetricsScraped.t`), never a wall clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from specmon.core import families
from specmon.core.events import Labels, MetricSample

SeriesKey = tuple[str, Labels]
"""One series: exported sample name and sorted labels."""


@dataclass(frozen=True, slots=True)
class CounterReset:
    """A counter series went down between two scrapes (a restart)."""

    t: float
    name: str
    labels: Labels
    before: float
    after: float


def counter_increase(before: float, after: float) -> tuple[float, bool]:
    """The increase from `before` to `after` and whether a reset happened.

    A drop means the counter restarted from 0, so the increase is `after` itself (never negative).
    """
    if after < before:
        return max(after, 0.0), True
    return after - before, False


def deltas_between(
    before: Iterable[MetricSample], after: Iterable[MetricSample], *, t: float = 0.0
) -> tuple[dict[SeriesKey, float], tuple[CounterReset, ...]]:
    """Counter deltas between two scrapes, per series, with the resets found.

    A series absent from `before` counts from 0 (it appeared: a new engine, or the first request
    created it). Gauges are ignored.
    """
    prev = {(s.name, s.labels): s.value for s in before if families.is_counter(s.name)}
    deltas: dict[SeriesKey, float] = {}
    resets: list[CounterReset] = []
    for s in after:
        if not families.is_counter(s.name):
            continue
        key = (s.name, s.labels)
        old = prev.get(key)
        if old is None:
            deltas[key] = max(s.value, 0.0)
            continue
        inc, reset = counter_increase(old, s.value)
        deltas[key] = inc
        if reset:
            resets.append(CounterReset(t, s.name, s.labels, old, s.value))
    return deltas, tuple(resets)


def sum_by_name(deltas: Mapping[SeriesKey, float], name: str) -> float | None:
    """The sum over every series (engines, labels) of `name`; None when no series has that name."""
    found = False
    total = 0.0
    for (n, _labels), v in deltas.items():
        if n == name:
            found = True
            total += v
    return total if found else None


@dataclass(frozen=True, slots=True)
class CounterPoint:
    """Reset-corrected totals of every counter series at one scrape."""

    t: float
    totals: Mapping[SeriesKey, float]


@dataclass(frozen=True, slots=True)
class CounterWindow:
    """Counter deltas between two scrapes `t0` < `t1` (seconds on the event clock)."""

    t0: float
    t1: float
    deltas: Mapping[SeriesKey, float]

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    def total(self, name: str) -> float | None:
        """Delta of `name` summed over its series; None when the name has no series."""
        return sum_by_name(self.deltas, name)

    def rate(self, name: str) -> float | None:
        """Delta of `name` per second over the window; None when undefined."""
        total = self.total(name)
        if total is None or self.seconds <= 0:
            return None
        return total / self.seconds


class CounterBank:
    """Reset-corrected totals of every counter series, with a ring of recent points.

    Series present on the first scrape count from 0 there (their history is unknown); a series that
    appears later counts its first value (it was created, from 0, since the previous scrape), the
    same rule as `deltas_between`.

    Memory is bounded: the ring keeps points no older than `keep_seconds` before the newest (and at
    most `max_points`); series are as many as the page has.
    """

    def __init__(self, *, keep_seconds: float = 120.0, max_points: int = 1024) -> None:
        self._raw: dict[SeriesKey, float] = {}
        self._totals: dict[SeriesKey, float] = {}
        self._points: deque[CounterPoint] = deque(maxlen=max_points)
        self._keep = keep_seconds
        self.reset_count = 0

    def observe(self, t: float, samples: Iterable[MetricSample]) -> tuple[CounterReset, ...]:
        """Fold one scrape; returns the resets it revealed. Older timestamps than the last are
        ignored (a scrape cannot arrive before the previous one)."""
        if self._points and t < self._points[-1].t:
            return ()
        resets: list[CounterReset] = []
        for s in samples:
            if not families.is_counter(s.name) or not math.isfinite(s.value):
                continue
            key = (s.name, s.labels)
            old = self._raw.get(key)
            self._raw[key] = s.value
            if old is None:
                # On the first scrape history is unknown: count from here. A series that appears
                # later was created since the previous scrape, so its value is its increase.
                self._totals[key] = max(s.value, 0.0) if self._points else 0.0
                continue
            inc, reset = counter_increase(old, s.value)
            self._totals[key] += inc
            if reset:
                resets.append(CounterReset(t, s.name, s.labels, old, s.value))
        self.reset_count += len(resets)
        self._points.append(CounterPoint(t, dict(self._totals)))
        while len(self._points) > 2 and self._points[1].t <= t - self._keep:
            self._points.popleft()
        return tuple(resets)

    @property
    def points(self) -> int:
        return len(self._points)

    def latest(self) -> CounterPoint | None:
        return self._points[-1] if self._points else None

    def totals(self) -> Mapping[SeriesKey, float]:
        """Reset-corrected totals since each series was first seen."""
        return dict(self._totals)

    def window(self, seconds: float) -> CounterWindow | None:
        """Deltas from the oldest point at most `seconds` before the newest, to the newest.

        None with fewer than two points in that span.
        """
        if len(self._points) < 2:
            return None
        last = self._points[-1]
        first: CounterPoint | None = None
        for p in self._points:
            if p.t >= last.t - seconds and p is not last:
                first = p
                break
        if first is None:
            return None
        return window_between(first, last)


def window_between(first: CounterPoint, last: CounterPoint) -> CounterWindow:
    """The deltas between two points of the same bank (series new since `first` count from 0)."""
    deltas = {k: v - first.totals.get(k, 0.0) for k, v in last.totals.items()}
    return CounterWindow(first.t, last.t, deltas)
