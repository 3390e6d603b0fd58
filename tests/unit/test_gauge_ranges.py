"""Gauges outside their range (a KV usage of 1e308, a negative request count) are not readings:
`null` in `watch --json`, with the reason in the server's `gauge_note`, by one rule
(core.gauge_ranges) for a /metrics page, an engine log line and a Prometheus."""

from __future__ import annotations

import json

import pytest
from tests.support.session_feed import LAB, SRC, Server

from specmon.core import families
from specmon.core.events import (
    FleetSampled,
    FleetTarget,
    MetricSample,
    MetricsScraped,
    ServerLogLine,
    SessionInfo,
)
from specmon.core.fleet_state import FleetState
from specmon.core.gauge_ranges import RANGES, checked_gauges
from specmon.core.session_state import SessionState
from specmon.core.watch_json import server_json

INFO = SessionInfo(server=SRC, model="tiny", n_spec=4)


def _page(t: float, srv: Server, **gauges: float) -> MetricsScraped:
    """`srv`'s page with the gauges given (by family attribute name) replaced."""
    replaced = {getattr(families, k): v for k, v in gauges.items()}
    samples = tuple(
        MetricSample(s.name, s.labels, replaced.get(s.name, s.value)) for s in srv.samples()
    )
    extra = tuple(
        MetricSample(name, LAB, v)
        for name, v in replaced.items()
        if all(s.name != name for s in samples)
    )
    return MetricsScraped(t, SRC, samples + extra)


def _server(state: SessionState) -> dict:
    snapshot = state.snapshot()
    json.dumps(snapshot, allow_nan=False)
    return snapshot["servers"][SRC]


@pytest.mark.parametrize(
    ("gauge", "value", "key"),
    [
        ("KV_CACHE_USAGE", 1e308, "kv_cache_usage"),
        ("KV_CACHE_USAGE", 1.5, "kv_cache_usage"),
        ("KV_CACHE_USAGE", -0.1, "kv_cache_usage"),
        ("V0_DRAFT_ACCEPTANCE_RATE", 7.0, "v0_draft_acceptance_rate"),
        ("REQUESTS_RUNNING", -1e308, "requests_running"),
        ("REQUESTS_WAITING", -3.0, "requests_waiting"),
    ],
)
def test_a_gauge_out_of_its_range_is_null_with_a_note(gauge: str, value: float, key: str):
    state = SessionState(INFO, window_seconds=10)
    srv = Server(k=4)
    for t in range(3):
        srv.step(2)
        state.apply(_page(float(t), srv, **{gauge: value}))
    s = _server(state)
    assert s[key] is None
    name = getattr(families, gauge)
    assert s["gauge_note"] is not None and f"{name} {value:.6g} is outside" in s["gauge_note"]
    if gauge == "KV_CACHE_USAGE":
        assert s["history"]["kv_cache_usage"] == [None, None, None]
    # the others are still read
    assert s["acceptance_length"] is not None
    if key != "kv_cache_usage":
        assert s["kv_cache_usage"] == 0.25


def test_gauges_within_range_have_no_note():
    state = SessionState(INFO)
    state.apply(_page(0.0, Server(k=4), KV_CACHE_USAGE=1.0, REQUESTS_RUNNING=0.0))
    s = _server(state)
    assert s["kv_cache_usage"] == 1.0 and s["requests_running"] == 0.0
    assert s["gauge_note"] is None


def test_one_engine_out_of_range_makes_the_family_unknown():
    """A maximum or sum over the other engines would not be the server's number."""
    e0, e1 = (("engine", "0"),), (("engine", "1"),)
    page = (
        MetricSample(families.KV_CACHE_USAGE, e0, 0.5),
        MetricSample(families.KV_CACHE_USAGE, e1, 2.0),
        MetricSample(families.REQUESTS_RUNNING, e0, 1.0),
        MetricSample(families.REQUESTS_RUNNING, e1, 2.0),
    )
    kept, notes = checked_gauges(page)
    assert kept == page[2:]
    assert notes == (f"{families.KV_CACHE_USAGE} 2 is outside its range (0 to 1)",)
    assert set(RANGES) == families.GAUGES  # every gauge read has its range


def test_an_engine_log_line_out_of_range_is_null_with_a_note():
    state = SessionState(INFO)
    state.apply(
        ServerLogLine(
            1.0,
            SRC,
            "INFO 08-20 15:42:49 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
            "tokens/s, Avg generation throughput: 9.0 tokens/s, Running: 1 reqs, Waiting: 0 "
            "reqs, GPU KV cache usage: 250.0%, Prefix cache hit rate: 50.0%",
        )
    )
    s = _server(state)
    engine = s["log"]["engine"]
    assert engine["kv_cache_usage"] is None and engine["prefix_cache_hit_rate"] == 0.5
    assert engine["running"] == 1
    assert s["gauge_note"] is not None and "log: KV cache usage 2.5 is outside" in s["gauge_note"]


def test_a_prometheus_gauge_out_of_range_is_null_with_a_note():
    state = FleetState()
    target = FleetTarget(
        job="vllm",
        instance="h:8000",
        url="http://h:8000/metrics",
        health="up",
        kv_cache_usage_frac=1e308,
        requests_running=-2.0,
        requests_waiting=1.0,
    )
    state.apply(FleetSampled(1.0, "http://prom:9090", 60.0, (target,)))
    (view,) = state.views()
    out = server_json(view)
    assert out["kv_cache_usage"] is None and out["requests_running"] is None
    assert out["requests_waiting"] == 1.0
    assert out["history"]["kv_cache_usage"] == [None]
    note = out["gauge_note"]
    assert note is not None and "kv_cache_usage 1e+308 is outside its range (0 to 1)" in note
    assert "requests_running -2 is outside its range (0 or more)" in note
