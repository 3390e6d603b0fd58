"""The range of every gauge specmon shows: one rule for every reader of one.

A gauge is a reading of the moment, not a count: vLLM's KV cache usage and V0 draft acceptance
rate are fractions (0 to 1), its running and waiting requests are counts (0 or more). A value
outside its range is not a reading, whoever sent it (a /metrics page, a Prometheus, an engine's
log line): it is unknown (None in the views, `null` in `watch --json`, "—" on screen), and a note
says which gauge and why, as for values that are not finite (those never reach here: a /metrics
page's NaN and ±Inf are dropped when it is parsed, and `request_rows.finite` drops the rest).

For a /metrics page, a family with one sample out of range is unknown as a whole (every engine's
samples of it dropped): a sum or maximum over the others would show a number that is not the
server's. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from specmon.core import families
from specmon.core.events import MetricSample

FRACTION = (0.0, 1.0)
"""A share: 0 to 1."""
COUNT = (0.0, math.inf)
"""A number of things: 0 or more."""

RANGES: Mapping[str, tuple[float, float]] = {
    families.KV_CACHE_USAGE: FRACTION,
    families.V0_DRAFT_ACCEPTANCE_RATE: FRACTION,
    families.REQUESTS_RUNNING: COUNT,
    families.REQUESTS_WAITING: COUNT,
}
"""Every gauge family specmon reads (families.GAUGES), with its range."""


def _span(low: float, high: float) -> str:
    return f"{low:g} or more" if math.isinf(high) else f"{low:g} to {high:g}"


def range_problem(name: str, value: float, valid: tuple[float, float]) -> str | None:
    """Why `value` of the gauge `name` is not a reading (None: it is one): one short clause
    naming the gauge, the value and its range."""
    low, high = valid
    if low <= value <= high:  # NaN fails too
        return None
    return f"{name} {value:.6g} is outside its range ({_span(low, high)})"


def in_range(
    name: str, value: float | None, valid: tuple[float, float], notes: list[str]
) -> float | None:
    """`value` when it is within `valid`, else None with the reason appended to `notes`."""
    if value is None:
        return None
    why = range_problem(name, value, valid)
    if why is None:
        return value
    notes.append(why)
    return None


def checked_gauges(
    samples: Iterable[MetricSample],
) -> tuple[tuple[MetricSample, ...], tuple[str, ...]]:
    """The gauge samples of a page (families.GAUGES), less every family that has a sample
    outside its range (RANGES), and one note per family dropped (the first bad value)."""
    gauges = tuple(s for s in samples if s.name in families.GAUGES)
    bad: dict[str, str] = {}
    for s in gauges:
        if s.name not in bad:
            why = range_problem(s.name, s.value, RANGES.get(s.name, (-math.inf, math.inf)))
            if why is not None:
                bad[s.name] = why
    if not bad:
        return gauges, ()
    kept = tuple(s for s in gauges if s.name not in bad)
    return kept, tuple(bad[name] for name in sorted(bad))


def gauge_note(notes: Iterable[str]) -> str | None:
    """The notes as one line for a view (None when there are none)."""
    text = "; ".join(notes)
    return f"not readings, shown as unknown: {text}" if text else None
