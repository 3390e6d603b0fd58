"""Percentiles from a Prometheus histogram's bucket counts, as PromQL's `histogram_quantile`
(what the vLLM Grafana dashboard plots): `histogram_quantile(0.95, sum by (le)
(rate(vllm:time_to_first_token_seconds_bucket[1m])))`.

Input: the increase of each cumulative bucket (`le` upper bound → count) over a window, every
other label (engine, model_name) summed away. Rules (Prometheus' `bucketQuantile`):
- buckets sorted by `le`; a `+Inf` bucket is required (it is the total); none, or a total of 0:
  no value (None);
- counts made monotonic (a lower bucket larger than a higher one is lowered to it: counts scraped
  at slightly different times);
- rank = q · total; the first bucket whose count reaches the rank holds the quantile;
- in the `+Inf` bucket: the largest finite bound; otherwise linear interpolation inside the
  bucket, from the previous bound (0 for the first bucket when its bound is positive).
So a value is only as fine as the buckets (vLLM's ITL buckets: 10 ms, 25 ms, 50 ms, …). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from specmon.core import families
from specmon.core.events import Labels
from specmon.core.views import HistogramLatency, PercentileView, ServerView, SessionView

SeriesKey = tuple[str, Labels]


def buckets_of(deltas: Mapping[SeriesKey, float], base: str) -> dict[float, float]:
    """The window's increase of each `<base>_bucket` bound, summed over every other label.
    A bucket whose `le` is not a number is left out."""
    name = base + "_bucket"
    out: dict[float, float] = {}
    for (n, labels), value in deltas.items():
        if n != name:
            continue
        le = dict(labels).get("le")
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        if math.isnan(bound):
            continue
        out[bound] = out.get(bound, 0.0) + value
    return out


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The q-quantile (0..1) of `buckets` (upper bound → cumulative count); None when the
    histogram has no `+Inf` bucket or counted nothing (see the module docstring)."""
    if not 0.0 <= q <= 1.0 or math.inf not in buckets:
        return None
    bounds = sorted(buckets)
    counts = [max(0.0, buckets[b]) for b in bounds]
    for i in range(len(counts) - 2, -1, -1):  # monotonic, from the top
        counts[i] = min(counts[i], counts[i + 1])
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    i = next(j for j, c in enumerate(counts) if c >= rank)
    if bounds[i] == math.inf:
        finite = [b for b in bounds if b != math.inf]
        return finite[-1] if finite else None
    upper = bounds[i]
    lower = bounds[i - 1] if i > 0 else min(0.0, upper)
    below = counts[i - 1] if i > 0 else 0.0
    inside = counts[i] - below
    if inside <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / inside


def histogram_percentiles(
    buckets: Mapping[float, float], ps: Iterable[float] = (50, 95, 99)
) -> PercentileView:
    """p50, p95, p99 (percent) of `buckets` as a PercentileView."""
    p50, p95, p99 = (histogram_quantile(p / 100, buckets) for p in ps)
    return PercentileView(p50=p50, p95=p95, p99=p99)


def histogram_count(buckets: Mapping[float, float]) -> float:
    """How many observations the window's histogram holds (its `+Inf` bucket)."""
    return max(0.0, buckets.get(math.inf, 0.0))


def histogram_latency(deltas: Mapping[SeriesKey, float]) -> HistogramLatency | None:
    """TTFT and ITL percentiles from a window's counter deltas; None when the page carries
    neither histogram's buckets."""
    ttft = buckets_of(deltas, families.TTFT)
    itl = buckets_of(deltas, families.ITL)
    if not ttft and not itl:
        return None
    return HistogramLatency(
        ttft_s=histogram_percentiles(ttft),
        itl_s=histogram_percentiles(itl),
        ttft_count=histogram_count(ttft),
        itl_count=histogram_count(itl),
    )


LatencySource = Literal["streams", "histograms"]
SOURCE_WORDS: dict[LatencySource, str] = {
    "streams": "from this client's streams",
    "histograms": "from server histograms",
}
"""How each source is said on screen and in `watch --json` (`latency_source_text`)."""


@dataclass(frozen=True, slots=True)
class LatencyChoice:
    """The TTFT and ITL percentiles to show for a server, and where they come from (None:
    nothing measured, every number None)."""

    ttft_s: PercentileView
    itl_s: PercentileView
    source: LatencySource | None

    @property
    def words(self) -> str:
        return SOURCE_WORDS[self.source] if self.source is not None else ""


def choose_latency(view: SessionView, server: ServerView | None) -> LatencyChoice:
    """This client's own streams when it has measured any (exact, per chunk); else the
    server's histograms over the window when they counted anything (other clients' traffic,
    e.g. under `watch`); else nothing."""
    p = view.percentiles
    if p.ttft_s.p50 is not None or p.itl_s.p50 is not None:
        return LatencyChoice(p.ttft_s, p.itl_s, "streams")
    lat = server.window.latency if server is not None else None
    if lat is not None and (lat.ttft_count > 0 or lat.itl_count > 0):
        return LatencyChoice(lat.ttft_s, lat.itl_s, "histograms")
    return LatencyChoice(PercentileView(), PercentileView(), None)
