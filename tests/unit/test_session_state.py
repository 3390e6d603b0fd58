"""The session state: folding every event type, the snapshot schema, and bounded memory."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from tests.support.retained import session_retained
from tests.support.session_feed import SRC, Server, gpu_sample, request_events
from tests.support.session_soak import Soak

from specmon.core.diagnosis.state import MAX_RECENT_SAVINGS
from specmon.core.diagnosis.thermal import MAX_POINTS
from specmon.core.events import (
    Marker,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    ServerLogLine,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.server_state import MAX_LOG_TAIL, MAX_RESETS_KEPT
from specmon.core.session_state import (
    MAX_CYCLE_SPEEDS,
    MAX_ITL_VALUES,
    MAX_MARKERS,
    MEMORY_CAP_BYTES,
    SessionState,
)

INFO = SessionInfo(server=SRC, model="tiny", n_spec=4, vllm_version="0.32.0")


def snap(state: SessionState) -> dict:
    s = state.snapshot()
    json.dumps(s, allow_nan=False)  # JSON-serialisable, no NaN
    return s


def feed(state: SessionState, events) -> None:
    for e in events:
        state.apply(e)


def test_empty_session_snapshot_has_the_schema_and_no_zeros():
    s = snap(SessionState(SessionInfo(simulated=True)))
    assert s["schema"] == "specmon-watch" and s["version"] == 1
    assert s["simulated"] is True
    assert s["servers"] == {}
    assert s["requests"]["summary"]["total"] == 0
    assert s["requests"]["summary"]["mean_decode_tok_s"] is None
    assert s["gpu"]["gpus"] == [] and s["cycle"] is None


def test_server_numbers_from_scrapes():
    state = SessionState(INFO, window_seconds=10)
    srv = Server(k=4)
    for t in range(12):
        for _ in range(20):
            srv.step(3)  # 4 tokens per step: AL 4.0, per position 1,1,1,0
        srv.running = 1
        state.apply(srv.scrape(float(t)))
    s = snap(state)["servers"][SRC]
    assert s["status"] == "up"
    assert s["spec_configured"] is True and s["n_spec"] == 4
    assert s["decode_tok_s"] == pytest.approx(80.0)
    assert s["acceptance_length"] == pytest.approx(4.0)
    assert s["draft_acceptance_rate"] == pytest.approx(0.75)
    assert s["per_position_rates"] == pytest.approx([1.0, 1.0, 1.0, 0.0])
    assert s["requests_running"] == 1 and s["kv_cache_usage"] == 0.25
    assert s["window_seconds"] == 10
    assert len(s["history"]["t"]) == 12
    assert s["history"]["acceptance_length"][0] is None  # one scrape: no window yet
    assert s["history"]["acceptance_length"][-1] == pytest.approx(4.0)


def test_idle_window_gives_none_not_one():
    state = SessionState(INFO)
    srv = Server()
    state.apply(srv.scrape(0.0))
    state.apply(srv.scrape(1.0))
    s = snap(state)["servers"][SRC]
    assert s["acceptance_length"] is None and s["decode_tok_s"] == 0.0


def test_counter_reset_is_marked_and_never_negative():
    state = SessionState(INFO)
    srv = Server()
    for _ in range(100):
        srv.step(2)
    state.apply(srv.scrape(0.0))
    restarted = Server()
    for _ in range(10):
        restarted.step(1)
    state.apply(restarted.scrape(5.0))
    s = snap(state)
    server = s["servers"][SRC]
    assert server["counter_resets"] >= 1
    assert server["recent_resets"][0]["before"] > server["recent_resets"][0]["after"]
    assert server["decode_tok_s"] >= 0 and server["acceptance_length"] == pytest.approx(2.0)
    assert any(m["kind"] == "counter_reset" for m in s["markers"])


def test_status_changes_and_unreadable_detail():
    state = SessionState(INFO)
    srv = Server()
    state.apply(srv.scrape(0.0))
    state.apply(ServerStatusChanged(t=3.0, source=SRC, status="stale", detail="no scrape for 3 s"))
    assert snap(state)["servers"][SRC]["status"] == "stale"
    state.apply(ServerStatusChanged(t=9.0, source=SRC, status="down", detail="connection refused"))
    state.apply(
        ServerStatusChanged(
            t=12.0, source=SRC, status="unreadable", detail="metrics unreadable: page truncated"
        )
    )
    s = snap(state)["servers"][SRC]
    assert s["status"] == "unreadable" and s["status_detail"].startswith("metrics unreadable")
    assert s["last_scrape_t"] == 0.0  # the last data is kept
    state.apply(srv.scrape(15.0))
    assert snap(state)["servers"][SRC]["status"] == "up"
    kinds = [m["label"] for m in snap(state)["markers"] if m["kind"] == "status"]
    assert kinds == [f"{SRC}: stale", f"{SRC}: down", f"{SRC}: unreadable"]


def test_request_rows_and_per_request_metrics_al_when_alone():
    state = SessionState(INFO)
    srv = Server(k=4)
    state.apply(srv.scrape(0.0))
    feed(state, request_events("r1", 1.0, tokens_per_step=5, steps=20, step_s=0.01, server=srv))
    state.apply(srv.scrape(2.0))
    s = snap(state)
    (row,) = s["requests"]["rows"]
    assert row["outcome"] == "ok" and row["completion_tokens"] == 101
    assert row["client_acceptance_length"] == 5.0
    assert row["decode_tok_s"] == pytest.approx(100 / 0.2)
    assert row["metrics_acceptance_length"] == pytest.approx(5.0)
    assert row["metrics_per_position_rates"] == pytest.approx([1.0] * 4)
    assert row["vanilla"] == {"flagged": False, "judged": True, "reasons": []}
    assert s["requests"]["summary"]["ok"] == 1


def test_failed_request_is_marked_with_tokens_kept():
    state = SessionState(INFO)
    feed(
        state, request_events("r1", 0.0, tokens_per_step=3, steps=5, step_s=0.01, outcome="failed")
    )
    (row,) = snap(state)["requests"]["rows"]
    assert row["outcome"] == "failed" and row["error"] == "server closed the stream"
    assert row["completion_tokens"] == 16
    assert row["vanilla"]["judged"] is False
    assert snap(state)["requests"]["summary"]["failed"] == 1


def test_in_flight_request_is_shown():
    state = SessionState(INFO)
    feed(state, request_events("r1", 0.0, tokens_per_step=3, steps=5, step_s=0.01)[:-1])
    s = snap(state)
    assert s["requests"]["rows"] == []
    (row,) = s["requests"]["in_flight"]
    assert row["outcome"] == "running" and row["completion_tokens"] == 16


def test_vanilla_flag_reasons_through_the_state():
    state = SessionState(INFO, baseline_tok_s=100.0)
    srv = Server(k=4)
    state.apply(srv.scrape(0.0))
    # acceptance near 0: one token per chunk while drafts are proposed
    feed(state, request_events("a", 1.0, tokens_per_step=1, steps=50, step_s=0.005))
    # throttled: slow, AL 3, a power-capped GPU sample during the request
    ev = request_events("b", 10.0, tokens_per_step=3, steps=20, step_s=0.06)
    feed(state, [*ev[:3], gpu_sample(10.5, reasons=("sw_power_cap",)), *ev[3:]])
    # contention: two overlapping slow requests
    c1 = request_events("c1", 20.0, tokens_per_step=3, steps=20, step_s=0.06)
    c2 = request_events("c2", 20.01, tokens_per_step=3, steps=20, step_s=0.06)
    feed(state, sorted(c1 + c2, key=lambda e: e.t))
    rows = {r["request_id"]: r for r in snap(state)["requests"]["rows"]}
    codes = {k: [x["code"] for x in r["vanilla"]["reasons"]] for k, r in rows.items()}
    assert codes == {
        "a": ["acceptance_near_zero"],
        "b": ["throttling"],
        "c1": ["batch_contention"],
        "c2": ["batch_contention"],
    }


def test_spec_not_configured_from_a_page_without_spec_families():
    state = SessionState(SessionInfo(server=SRC))
    plain = tuple(s for s in Server().samples() if not s.name.startswith("vllm:spec_decode_"))
    state.apply(MetricsScraped(t=0.0, source=SRC, samples=plain))
    feed(state, request_events("r", 1.0, tokens_per_step=1, steps=40, step_s=0.01))
    (row,) = snap(state)["requests"]["rows"]
    assert [x["code"] for x in row["vanilla"]["reasons"]] == ["spec_not_configured"]
    assert snap(state)["servers"][SRC]["spec_configured"] is False


def test_page_without_any_vllm_family_leaves_configuration_unknown():
    state = SessionState(SessionInfo(server=SRC))  # --disable-log-stats: no vllm: family at all
    state.apply(MetricsScraped(t=0.0, source=SRC, samples=()))
    feed(state, request_events("r", 1.0, tokens_per_step=1, steps=40, step_s=0.01))
    assert snap(state)["servers"][SRC]["spec_configured"] is None
    (row,) = snap(state)["requests"]["rows"]
    assert row["vanilla"]["flagged"] is False


def test_cycle_summary_over_completed_requests():
    state = SessionState(INFO)
    speeds = [221, 214, 218, 222, 230, 103, 59, 62, 62, 212] * 3
    for i, v in enumerate(speeds):
        feed(state, request_events(f"r{i}", 10.0 * i, tokens_per_step=1, steps=100, step_s=1 / v))
    c = snap(state)["cycle"]
    assert c["detected"] is True and c["period"] == 10
    assert c["degraded_per_cycle"] == 3 and c["transitions_per_cycle"] == 1
    assert c["fast_mean_tok_s"] == pytest.approx(221, abs=1)
    assert c["long_run_mean_tok_s"] == pytest.approx(160, abs=1)


def test_row_cap_keeps_summary_of_all_requests():
    state = SessionState(INFO, max_requests=10)
    for i in range(25):
        feed(state, request_events(f"r{i}", 10.0 * i, tokens_per_step=2, steps=10, step_s=0.01))
    s = snap(state)["requests"]
    assert len(s["rows"]) == 10 and s["rows"][0]["request_id"] == "r15"
    assert s["summary"]["total"] == 25 and s["summary"]["rows_dropped"] == 15
    assert s["summary"]["mean_decode_tok_s"] == pytest.approx(20 / 0.1)


def test_log_lines_markers_and_gpu():
    state = SessionState(INFO)
    state.apply(
        ServerLogLine(
            t=1.0,
            source=SRC,
            line="(APIServer pid=1) INFO 08-20 15:42:49 [metrics.py:120] SpecDecoding metrics: "
            "Mean acceptance length: 2.89, Accepted throughput: 1.61 tokens/s, Drafted "
            "throughput: 1.71 tokens/s, Accepted: 17 tokens, Drafted: 18 tokens, Per-position "
            "acceptance rate: 1.000, 0.556, 0.222, 0.111, Avg Draft acceptance rate: 94.4%",
        )
    )
    state.apply(Marker(t=2.0, label="changed n_spec"))
    state.apply(gpu_sample(3.0, temp=71.0))
    s = snap(state)
    log = s["servers"][SRC]["log"]
    assert log["spec_decoding"]["acceptance_length"] == 2.89 and log["lines"] == 1
    assert s["markers"] == [{"t": 2.0, "kind": "user", "label": "changed n_spec"}]
    assert s["gpu"]["gpus"][0]["temperature_c"] == 71.0
    assert s["gpu"]["history"]["0"]["temperature_c"] == [71.0]


@pytest.mark.slow
def test_every_ring_full_stays_under_the_cap_and_grows_no_more():
    """The long soak in short (benchmarks/session_soak.py folds 10 hours and prints the figures):
    a dense session (a request, two markers each second, a log line every 5 s, a restart a
    minute) fills every ring of the default state in 600 s (the history's 600 points; the others
    sooner); 700 s are folded. Its memory is then under MEMORY_CAP_BYTES, and 300 s more (300
    requests, about 14,000 events) leave every count where it was and add no memory beyond
    allocator noise (8 KiB: under 28 bytes a request, well under one byte an event)."""
    state = SessionState(INFO, baseline_tok_s=60.0)
    soak = Soak(request_every=1, marker_every=0.5, restart_every=60, log_every=5)

    def measure() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        soak.run(state, 700)
        full, counts = measure(), session_retained(state)
        events = soak.events
        soak.run(state, 300)
        later = measure()
    finally:
        tracemalloc.stop()
    assert counts["rows"] == state.max_requests
    assert counts["server_history"] == counts["gpu_history"] == state.history_points
    assert counts["itl"] == MAX_ITL_VALUES and counts["speeds"] == MAX_CYCLE_SPEEDS
    assert counts["markers"] == MAX_MARKERS and counts["resets"] == MAX_RESETS_KEPT
    assert counts["log_tail"] == MAX_LOG_TAIL
    assert counts["diagnosis"] == MAX_POINTS + MAX_RECENT_SAVINGS
    assert full <= MEMORY_CAP_BYTES
    assert soak.events - events > 10_000
    assert session_retained(state) == counts
    assert later - full <= 8 * 1024, f"{later - full} bytes more after 300 requests"
    s = snap(state)
    assert s["requests"]["summary"]["total"] == 1000  # counted, though only 500 rows are kept
    assert s["servers"][SRC]["counter_resets"] > 0


def test_summary_means_count_only_finished_ok_requests():
    state = SessionState(SessionInfo(server="http://s"))
    for rid, outcome, t_end in (("ok1", "ok", 1.0), ("bad", "failed", 0.2)):
        state.apply(RequestStarted(t=0.0, request_id=rid, source="http://s", model="m"))
        state.apply(StreamChunk(t=0.01, request_id=rid, role="assistant", completion_tokens=0))
        state.apply(StreamChunk(t=0.1, request_id=rid, text="a", completion_tokens=1))
        state.apply(StreamChunk(t=t_end, request_id=rid, text="b", completion_tokens=11))
        state.apply(RequestEnded(t=t_end, request_id=rid, outcome=outcome, completion_tokens=11))
    summary = state.snapshot()["requests"]["summary"]
    assert summary["total"] == 2 and summary["failed"] == 1
    assert summary["mean_decode_tok_s"] == pytest.approx(10 / 0.9)  # the ok request's alone


def test_one_history_holds_what_the_graphs_draw_and_json_shows_it():
    """The panel's graphs (window and since-start AL and acceptance rate) kept a
    history of their own beside the state's; the state's one history per server now holds them,
    each entry equal to the view's numbers at that scrape, and `watch --json` shows the same."""
    state = SessionState(INFO, window_seconds=10)
    srv = Server(k=4)
    seen = []
    for t in range(6):
        for _ in range(20):
            srv.step(3 if t < 3 else 1)  # AL 4 for three seconds, then AL 2
        state.apply(srv.scrape(float(t)))
        server = state.view().servers[0]
        seen.append(
            (
                server.window.draft_acceptance_rate,
                server.lifetime.acceptance_length,
                server.lifetime.draft_acceptance_rate,
            )
        )
    h = state.view().servers[0].history
    assert (
        list(
            zip(
                h.draft_acceptance_rate,
                h.acceptance_length_lifetime,
                h.draft_acceptance_rate_lifetime,
                strict=True,
            )
        )
        == seen
    )
    assert h.acceptance_length_lifetime[-1] == pytest.approx(3.0)  # 60 steps at 4, 60 at 2
    js = snap(state)["servers"][SRC]["history"]
    assert js["draft_acceptance_rate"] == list(h.draft_acceptance_rate)
    assert js["acceptance_length_lifetime"] == list(h.acceptance_length_lifetime)
    assert js["draft_acceptance_rate_lifetime"] == list(h.draft_acceptance_rate_lifetime)
