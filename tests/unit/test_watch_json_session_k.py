"""`session.n_spec` of the watch JSON when the server does not announce K (real vLLM in attach
mode: /version and /v1/models say nothing of it; seen on vLLM 0.26.0 on an H100, docs/gpu.md)."""

from __future__ import annotations

from tests.support.session_feed import SRC, Server

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState


def scraped(info: SessionInfo, k: int) -> dict:
    state = SessionState(info, window_seconds=10)
    srv = Server(k=k)
    for t in range(3):
        for _ in range(5):
            srv.step(k)
        state.apply(srv.scrape(float(t)))
    return state.snapshot()


def test_session_k_comes_from_the_scrape_when_the_server_did_not_say():
    s = scraped(SessionInfo(server=SRC, model="tiny", vllm_version="0.26.0"), 4)
    assert s["servers"][SRC]["n_spec"] == 4
    assert s["session"]["n_spec"] == 4


def test_a_k_the_command_or_server_gave_wins():
    s = scraped(SessionInfo(server=SRC, model="tiny", n_spec=8), 4)
    assert s["session"]["n_spec"] == 8


def test_no_scrape_no_k():
    s = SessionState(SessionInfo(server=SRC, model="tiny")).snapshot()
    assert s["session"]["n_spec"] is None
