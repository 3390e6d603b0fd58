"""Per-engine numbers of one server (data-parallel ranks, vLLM's `engine` label), the removal of a
watched server from the view, and counter resets of one server among several."""

from __future__ import annotations

import pytest
from tests.support.session_feed import Server

from specmon.core import families
from specmon.core.events import MetricSample, MetricsScraped, ServerStatusChanged, SessionInfo
from specmon.core.recording_format import EventDecoder, EventEncoder
from specmon.core.session_state import SessionState

A = "http://127.0.0.1:8000"
B = "http://127.0.0.1:8001"


def _engines_page(servers: list[Server], running: list[float]) -> tuple[MetricSample, ...]:
    """One page with one engine label per Server (engine "0", "1", ...)."""
    out: list[MetricSample] = []
    for n, (s, r) in enumerate(zip(servers, running, strict=True)):
        lab = (("engine", str(n)), ("model_name", "tiny"))
        s.running = r
        for x in s.samples():
            labels = tuple((k, str(n) if k == "engine" else v) for k, v in x.labels)
            out.append(MetricSample(x.name, labels, x.value))
        out.append(MetricSample(families.REQUESTS_WAITING, lab, float(n)))
    # samples() already adds a waiting gauge of 0 per engine; the extra one above adds n
    return tuple(out)


def test_engines_are_shown_apart_and_sum_to_the_server() -> None:
    state = SessionState(SessionInfo(server=A), window_seconds=30.0)
    e0, e1 = Server(k=4), Server(k=4)
    state.apply(MetricsScraped(t=0.0, source=A, samples=_engines_page([e0, e1], [0, 0])))
    for _ in range(100):
        e0.step(3)  # 4 tokens a step, AL 4
    for _ in range(50):
        e1.step(1)  # 2 tokens a step, AL 2
    state.apply(MetricsScraped(t=10.0, source=A, samples=_engines_page([e0, e1], [2, 1])))
    server = state.publish().servers[0]
    assert server.engines == ("0", "1")
    by = {e.engine: e for e in server.engine_numbers}
    assert by["0"].decode_tok_s == pytest.approx(400 / 10)
    assert by["1"].decode_tok_s == pytest.approx(100 / 10)
    assert by["0"].acceptance_length == pytest.approx(4.0)
    assert by["1"].acceptance_length == pytest.approx(2.0)
    assert by["0"].draft_acceptance_rate == pytest.approx(0.75)
    assert by["1"].draft_acceptance_rate == pytest.approx(0.25)
    assert (by["0"].requests_running, by["1"].requests_running) == (2.0, 1.0)
    assert (by["0"].requests_waiting, by["1"].requests_waiting) == (0.0, 1.0)
    # The server row: tok/s and counts summed, AL pooled over the engines' deltas.
    assert server.window.decode_tok_s == pytest.approx(50.0)
    assert server.window.acceptance_length == pytest.approx(1 + (300 + 50) / 150)
    assert server.requests_running == 3.0 and server.requests_waiting == 1.0


def test_one_engine_server_has_one_engine_entry_and_none_before_a_window() -> None:
    state = SessionState(SessionInfo(server=A), window_seconds=30.0)
    s = Server(k=4)
    state.apply(s.scrape(0.0, A))
    (only,) = state.publish().servers[0].engine_numbers
    assert only.engine == "0" and only.decode_tok_s is None and only.acceptance_length is None
    assert only.kv_cache_usage_frac == 0.25


def test_a_removed_server_leaves_the_view_and_the_others_stay() -> None:
    state = SessionState(SessionInfo(server=A), window_seconds=30.0)
    a, b = Server(k=4), Server(k=4)
    state.apply(a.scrape(0.0, A))
    state.apply(b.scrape(0.0, B))
    state.apply(ServerStatusChanged(t=1.0, source=B, status="removed"))
    view = state.publish()
    assert [s.source for s in view.servers] == [A]
    assert any(m.label == f"{B}: removed" for m in view.markers)
    # Watched again later: a fresh row (no numbers carried over).
    state.apply(b.scrape(2.0, B))
    assert [s.source for s in state.publish().servers] == [A, B]


def test_removed_status_round_trips_through_a_recording() -> None:
    event = ServerStatusChanged(t=1.5, source=B, status="removed")
    decoded = EventDecoder().decode(EventEncoder().encode(event))
    assert decoded == event


def test_a_restarted_server_continues_while_the_other_keeps_its_numbers() -> None:
    state = SessionState(SessionInfo(server=A), window_seconds=5.0)
    a, b = Server(k=4), Server(k=4)
    for t in range(0, 6):
        for _ in range(10):
            a.step(3)
            b.step(3)
        state.apply(a.scrape(float(t), A))
        state.apply(b.scrape(float(t), B))
    state.apply(ServerStatusChanged(t=6.0, source=B, status="down", detail="connection refused"))
    down = state.publish().server(B)
    assert down is not None and down.status == "down" and down.status_detail == "connection refused"
    b = Server(k=4)  # restarted: counters from 0
    for t in range(7, 12):
        for _ in range(10):
            a.step(3)
            b.step(1)
        state.apply(a.scrape(float(t), A))
        state.apply(b.scrape(float(t), B))
    view = state.publish()
    after, other = view.server(B), view.server(A)
    assert after is not None and other is not None
    assert after.status == "up" and after.counter_resets > 0
    assert after.window.acceptance_length == pytest.approx(2.0)  # never negative, continues
    assert after.window.decode_tok_s == pytest.approx(20.0)
    assert other.counter_resets == 0 and other.window.acceptance_length == pytest.approx(4.0)
