"""Pure statistics for bench, sweep and compare: distributions, estimates with their noise, and
the "is this difference larger than its noise" test.

Distributions follow `vllm bench serve` (numpy): mean, median (= linear 50th percentile), std
(population, numpy's default ddof=0), and percentiles with linear interpolation
(`core.percentiles`, bit-for-bit numpy's method).

Noise: an `Estimate` is a value with its standard error. Two estimates differ beyond their noise
when |a - b| > Z·sqrt(se_a² + se_b²) with Z = 2 (about a 95% two-sided test for means). Where a
statistic has no closed-form standard error (a 95th percentile of one run), a seeded bootstrap
gives one, so the verdicts are reproducible.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmon.core.percentiles import percentile_sorted

NOISE_Z = 2.0
"""How many combined standard errors a difference must exceed to count as real."""

BOOTSTRAP_REPS = 200
BOOTSTRAP_SEED = 12


@dataclass(frozen=True, slots=True)
class Dist:
    """mean, median, std, p95, p99 and count of a set of values (None fields when empty)."""

    n: int
    mean: float | None
    median: float | None
    std: float | None
    p95: float | None
    p99: float | None
    min: float | None = None
    max: float | None = None

    def scaled(self, factor: float) -> Dist:
        """The same distribution in another unit (seconds → ms: factor 1000)."""

        def s(v: float | None) -> float | None:
            return None if v is None else v * factor

        return Dist(
            self.n,
            s(self.mean),
            s(self.median),
            s(self.std),
            s(self.p95),
            s(self.p99),
            s(self.min),
            s(self.max),
        )

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "std": self.std,
            "p95": self.p95,
            "p99": self.p99,
            "min": self.min,
            "max": self.max,
        }

    @staticmethod
    def from_dict(d: dict[str, object]) -> Dist:
        def f(key: str) -> float | None:
            v = d.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        n = d.get("n")
        return Dist(
            int(n) if isinstance(n, int) else 0,
            f("mean"),
            f("median"),
            f("std"),
            f("p95"),
            f("p99"),
            f("min"),
            f("max"),
        )


def dist(values: Sequence[float]) -> Dist:
    """The distribution of the finite values (numpy's mean/median/std/linear percentiles)."""
    data = sorted(v for v in values if math.isfinite(v))
    n = len(data)
    if n == 0:
        return Dist(0, None, None, None, None, None)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / n)
    return Dist(
        n,
        mean,
        percentile_sorted(data, 50),
        std,
        percentile_sorted(data, 95),
        percentile_sorted(data, 99),
        data[0],
        data[-1],
    )


@dataclass(frozen=True, slots=True)
class Estimate:
    """A value with its standard error (None = the noise is unknown) and how many samples."""

    value: float
    se: float | None
    n: int
    sd: float | None = None
    """Sample standard deviation of the samples the value came from (the spread), if any."""

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "se": self.se, "n": self.n, "sd": self.sd}


def mean_estimate(values: Sequence[float]) -> Estimate | None:
    """The mean with its standard error sd/sqrt(n) (sample sd, ddof=1); se None for one value."""
    data = [v for v in values if math.isfinite(v)]
    if not data:
        return None
    n = len(data)
    m = math.fsum(data) / n
    if n < 2:
        return Estimate(m, None, n, None)
    sd = statistics.stdev(data)
    return Estimate(m, sd / math.sqrt(n), n, sd)


def bootstrap_estimate(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float | None],
    *,
    reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> Estimate | None:
    """`statistic(values)` with a seeded bootstrap standard error (None with under 2 values)."""
    data = [v for v in values if math.isfinite(v)]
    point = statistic(data) if data else None
    if point is None:
        return None
    if len(data) < 2:
        return Estimate(point, None, len(data))
    rng = random.Random(seed)
    n = len(data)
    draws: list[float] = []
    for _ in range(reps):
        sample = [data[rng.randrange(n)] for _ in range(n)]
        v = statistic(sample)
        if v is not None:
            draws.append(v)
    se = statistics.stdev(draws) if len(draws) > 1 else None
    return Estimate(point, se, n)


def p95_of(values: Sequence[float]) -> float | None:
    return percentile_sorted(sorted(values), 95)


def noise(a: Estimate, b: Estimate) -> float | None:
    """The combined noise Z·sqrt(se_a² + se_b²); None when either noise is unknown."""
    if a.se is None or b.se is None:
        return None
    return NOISE_Z * math.hypot(a.se, b.se)


def differs(a: Estimate, b: Estimate) -> bool | None:
    """True when a and b differ by more than their noise; None when the noise is unknown."""
    limit = noise(a, b)
    if limit is None:
        return None
    return abs(a.value - b.value) > limit


def ratio(a: float | None, b: float | None) -> float | None:
    """b / a (how B compares with A); None when undefined."""
    if a is None or b is None or a == 0:
        return None
    return b / a
