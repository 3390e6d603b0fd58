"""The fleet read of a real `vllm serve` (the real tier's same-weights draft server, CPU) through
the real Prometheus: the acceptance numbers vLLM's own counters give, read by PromQL, and the
same since-start AL as specmon's direct /metrics scrape. Part of the real-vLLM tier (its
fixture): run it under the machine-wide lock, `flock /tmp/specmon-real-vllm.lock -c '...'`."""

from __future__ import annotations

import time

import httpx
import pytest
from tests.real_vllm.probe import chat_body, stream_chunks
from tests.real_vllm.server import VllmServer
from tests.support.fleet import StartPrometheus, by_source, fleet_for, read

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Monitor, Target


def test_fleet_reads_a_real_vllm_server_through_prometheus(
    vllm_draft_same: VllmServer, start_prometheus: StartPrometheus
) -> None:
    server = vllm_draft_same
    prom = start_prometheus({"vllm": [f"127.0.0.1:{server.port}"]})
    prom.wait_for_scrapes('up{job="vllm"} == 1', 1, timeout=60)
    time.sleep(6.0)  # the rate window (5 s) holds no earlier traffic
    n_spec = server.n_spec
    assert n_spec == 4
    stream_chunks(server.url, chat_body(server.model_name, "fleet", 1 + 8 * (n_spec + 1), 0.0))
    time.sleep(2.5)  # two scrape intervals
    attach = Monitor([Target(server.url)], SessionState, interval=1.0)
    attach.start(run_loops=False)
    try:
        attach.scrape_all_once()
        direct = attach.view(fresh=True).servers[0]
    finally:
        attach.stop()
    state = SessionState(SessionInfo())
    event = read(fleet_for(prom.url, rate_window_s=5.0), state)
    assert event.error is None
    fleet = by_source(state.view())[server.url]
    assert fleet.origin == "prometheus" and fleet.status == "up"
    # Greedy decoding with the target's own weights as the draft accepts every draft token.
    assert fleet.window.acceptance_length == pytest.approx(5.0, abs=1e-9)
    assert fleet.window.draft_acceptance_rate == pytest.approx(1.0, abs=1e-9)
    assert fleet.window.per_position_rates == pytest.approx((1.0, 1.0, 1.0, 1.0), abs=1e-9)
    assert fleet.n_spec == 4 and fleet.spec_configured is True
    assert fleet.lifetime is not None and direct.lifetime is not None
    assert fleet.lifetime.acceptance_length == direct.lifetime.acceptance_length
    assert fleet.lifetime.drafts == direct.lifetime.drafts
    assert fleet.kv_cache_usage_frac is not None and fleet.requests_running == 0.0
    assert httpx.get(server.url + "/health", timeout=5).status_code == 200
