"""Percentiles exactly as `numpy.percentile(values, p)` computes them (method "linear").

`vllm bench serve` reports p50/p95/p99 with numpy's default linear interpolation; specmon's figures
must match it bit for bit without importing numpy at run time. numpy computes the virtual index
(n - 1)·(p/100), takes its floor and the next element of the sorted data, and interpolates with
`a + (b - a)·g`, or `b - (b - a)·(1 - g)` when g ≥ 0.5 (its `_lerp`, for numerical stability).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile_sorted(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0..100) of already-sorted finite values; None when empty."""
    n = len(values)
    if n == 0:
        return None
    if not 0 <= p <= 100:
        raise ValueError(f"a percentile must be within 0..100 (got {p})")
    virtual = (n - 1) * (p / 100)
    if virtual >= n - 1:
        return float(values[-1])
    lo = math.floor(virtual)
    gamma = virtual - lo
    a = float(values[lo])
    b = float(values[lo + 1])
    diff = b - a
    if gamma >= 0.5:
        return b - diff * (1 - gamma)
    return a + diff * gamma


def percentile(values: Iterable[float], p: float) -> float | None:
    """The p-th percentile of finite values (non-finite ones are skipped); None when empty."""
    return percentile_sorted(sorted(v for v in values if math.isfinite(v)), p)


def summary(values: Iterable[float], ps: Sequence[float] = (50, 95, 99)) -> dict[str, float | None]:
    """{"p50": …, "p95": …, "p99": …} (keys `p<int>` or `p<float>`), None when no values."""
    data = sorted(v for v in values if math.isfinite(v))
    return {f"p{p:g}": percentile_sorted(data, p) for p in ps}


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean of finite values; None when empty."""
    data = [v for v in values if math.isfinite(v)]
    return math.fsum(data) / len(data) if data else None
