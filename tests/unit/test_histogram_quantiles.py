"""Percentiles from histogram bucket deltas (core/histogram_quantiles.py), as PromQL's
histogram_quantile (Grafana's vLLM dashboard) computes them: hand-worked values."""

from __future__ import annotations

import dataclasses
import math

import pytest

from specmon.core import families
from specmon.core.events import MetricsScraped, SessionInfo
from specmon.core.histogram_quantiles import (
    buckets_of,
    choose_latency,
    histogram_latency,
    histogram_quantile,
)
from specmon.core.session_state import SessionState
from specmon.core.views import HistogramLatency, PercentileView

INF = math.inf


def test_linear_interpolation_inside_the_bucket() -> None:
    b = {0.1: 0.0, 0.2: 10.0, 0.4: 20.0, INF: 20.0}
    # rank 10 of 20: the 0.1-0.2 bucket holds 10, all of it below the rank's end
    assert histogram_quantile(0.5, b) == pytest.approx(0.2)
    # rank 15: half way through the 0.2-0.4 bucket (10 of its 10 observations)
    assert histogram_quantile(0.75, b) == pytest.approx(0.3)
    assert histogram_quantile(0.95, b) == pytest.approx(0.2 + 0.2 * 9 / 10)


def test_the_first_bucket_starts_at_zero() -> None:
    assert histogram_quantile(0.5, {1.0: 4.0, INF: 4.0}) == pytest.approx(0.5)


def test_a_quantile_in_the_inf_bucket_is_the_largest_finite_bound() -> None:
    assert histogram_quantile(0.99, {0.1: 1.0, 0.5: 2.0, INF: 10.0}) == 0.5


def test_nothing_counted_or_no_inf_bucket_gives_none() -> None:
    assert histogram_quantile(0.5, {0.1: 0.0, INF: 0.0}) is None
    assert histogram_quantile(0.5, {0.1: 3.0, 0.2: 5.0}) is None
    assert histogram_quantile(0.5, {}) is None
    assert histogram_quantile(1.5, {0.1: 3.0, INF: 3.0}) is None


def test_counts_are_made_monotonic_from_the_top() -> None:
    # 0.1 counted 5 but 0.2 only 3 (scraped a moment apart): the lower bucket is lowered to 3.
    assert histogram_quantile(0.5, {0.1: 5.0, 0.2: 3.0, INF: 3.0}) == pytest.approx(0.05)


def test_buckets_are_summed_over_engines_and_other_series_left_out() -> None:
    name = families.TTFT + "_bucket"
    deltas = {
        (name, (("engine", "0"), ("le", "0.1"))): 2.0,
        (name, (("engine", "1"), ("le", "0.1"))): 3.0,
        (name, (("engine", "0"), ("le", "+Inf"))): 4.0,
        (name, (("engine", "1"), ("le", "+Inf"))): 6.0,
        (name, (("engine", "1"), ("le", "nonsense"))): 99.0,
        (families.ITL + "_bucket", (("le", "0.1"),)): 7.0,
        (families.TTFT + "_count", ()): 10.0,
    }
    assert buckets_of(deltas, families.TTFT) == {0.1: 5.0, INF: 10.0}
    lat = histogram_latency(deltas)
    assert lat is not None and lat.ttft_count == 10.0
    assert lat.ttft_s.p50 == pytest.approx(0.1)  # rank 5 of 10: the end of the 0.1 bucket
    assert lat.itl_count == 0.0 and lat.itl_s.p50 is None  # no +Inf bucket for ITL
    assert histogram_latency({(families.TTFT + "_count", ()): 1.0}) is None


def test_choose_latency_prefers_own_streams_then_server_histograms() -> None:
    view = SessionState(SessionInfo()).view()
    assert choose_latency(view, None).source is None
    lat = HistogramLatency(PercentileView(0.05, 0.1, 0.2), PercentileView(), 4.0, 0.0)
    state = SessionState(SessionInfo(server="http://a"))
    state.apply(MetricsScraped(t=1.0, source="http://a", samples=()))
    server = state.view().servers[0]
    server = dataclasses.replace(server, window=dataclasses.replace(server.window, latency=lat))
    chosen = choose_latency(view, server)
    assert chosen.source == "histograms" and chosen.ttft_s.p95 == 0.1
    assert chosen.words == "from server histograms"
    own = dataclasses.replace(
        view,
        percentiles=dataclasses.replace(view.percentiles, ttft_s=PercentileView(0.3, 0.4, 0.5)),
    )
    mine = choose_latency(own, server)
    assert mine.source == "streams" and mine.ttft_s.p50 == 0.3
    assert mine.words == "from this client's streams"
