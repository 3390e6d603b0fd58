"""The /metrics scraper against the simulator: samples, status states, faults → resulting state."""

from __future__ import annotations

import asyncio
import socket

from specmon.core.clock import FakeClock
from specmon.core.events import MetricsScraped, ServerStatusChanged, SessionInfo
from specmon.core.session_state import SessionState
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens
from specmon.sources.stream_client import ChatRequest, StreamClient


def _scrape(url: str, times: int = 1, **kwargs) -> tuple[list, MetricsScraper]:
    events: list = []
    scraper = MetricsScraper(url, **kwargs)

    async def go():
        for _ in range(times):
            await scraper.scrape_once(events.append)
        await scraper.aclose()

    asyncio.run(go())
    return events, scraper


def _statuses(events) -> list[str]:
    return [e.status for e in events if isinstance(e, ServerStatusChanged)]


def test_a_scrape_reads_the_families_and_reports_up(sim):
    events, _scraper = _scrape(sim.url + "/metrics", source=sim.url)
    assert _statuses(events) == ["up"]
    scraped = [e for e in events if isinstance(e, MetricsScraped)]
    assert len(scraped) == 1
    names = {s.name for s in scraped[0].samples}
    assert "vllm:spec_decode_num_drafts_total" in names
    assert "vllm:generation_tokens_total" in names
    assert all(n.startswith("vllm:") and not n.endswith("_created") for n in names)
    assert scraped[0].source == sim.url


def test_malformed_and_truncated_pages_are_unreadable_and_recover(sim):
    for fault in ("malformed", "truncated"):
        state = SessionState(SessionInfo())
        events, _ = _scrape(sim.url + "/metrics", headers={"X-Specmon-Fault": f"metrics={fault}"})
        for e in events:
            state.apply(e)
        server = next(iter(state.snapshot()["servers"].values()))
        assert server["status"] == "unreadable"
        assert server["status_detail"].startswith("metrics unreadable: ")
        # the next good page is read again
        more, _ = _scrape(sim.url + "/metrics")
        for e in more:
            state.apply(e)
        assert next(iter(state.snapshot()["servers"].values()))["status"] == "up"


def test_size_cap_stops_reading_and_says_so(sim):
    events, _ = _scrape(sim.url + "/metrics", max_bytes=1000)
    (status,) = [e for e in events if isinstance(e, ServerStatusChanged)]
    assert status.status == "unreadable"
    assert "cap of 1000 bytes" in status.detail


def test_refused_connection_is_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    events, _scraper = _scrape(f"http://127.0.0.1:{port}/metrics")
    assert _statuses(events) == ["down"]
    assert "cannot connect" in events[0].detail


def test_no_answer_goes_stale_then_down_and_data_is_kept(sim):
    """A server that accepts but never answers: stale after stale_after s, down after N failures."""
    clock = FakeClock()
    state = SessionState(SessionInfo())
    events: list = []

    def emit(e):
        events.append(e)
        state.apply(e)

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepts connections into the backlog, never answers
    good = MetricsScraper(sim.url + "/metrics", source="srv", clock=clock)
    bad = MetricsScraper(
        f"http://127.0.0.1:{silent.getsockname()[1]}/metrics",
        source="srv",
        clock=clock,
        timeout=0.2,
        stale_after=3.0,
        down_after=4,
    )

    async def go():
        await good.scrape_once(emit)  # up, with data
        bad.status, bad.last_success = good.status, good.last_success
        for _ in range(4):
            clock.advance(1.5)
            await bad.scrape_once(emit)
        await good.aclose()
        await bad.aclose()

    try:
        asyncio.run(go())
    finally:
        silent.close()
    assert _statuses(events) == ["up", "stale", "down"]
    stale = next(e for e in events if isinstance(e, ServerStatusChanged) and e.status == "stale")
    assert stale.t == 4.5  # first failure more than 3 s after the last success (t=0)
    server = state.snapshot()["servers"]["srv"]
    assert server["status"] == "down"
    assert server["totals"]["generation_tokens"] is not None  # the data is kept


def test_server_restart_resets_counters_and_state_marks_it(sim):
    state = SessionState(SessionInfo(simulated=True))

    async def go():
        client = StreamClient(sim.url)
        scraper = MetricsScraper(sim.url + "/metrics", source=client.source)
        await client.chat(ChatRequest("a", max_tokens=32), state.apply)
        await scraper.scrape_once(state.apply)
        await client.chat(
            ChatRequest("b", max_tokens=8, extra_body={"specmon_fault": "restart"}), state.apply
        )
        await scraper.scrape_once(state.apply)
        await client.aclose()
        await scraper.aclose()

    asyncio.run(go())
    server = state.snapshot()["servers"][sim.url]
    assert server["counter_resets"] >= 1
    assert server["recent_resets"]
    assert server["totals"]["generation_tokens"] >= 0


def test_end_of_request_scrape_waits_for_the_generation_delta(sim):
    async def go():
        client = StreamClient(sim.url)
        scraper = MetricsScraper(sim.url + "/metrics", source=client.source)
        before = await scraper.scrape_once(lambda e: None)
        base = generation_tokens(before.samples)
        end = await client.chat(ChatRequest("x", max_tokens=40), lambda e: None)
        after = await scraper.scrape_until_generation(
            lambda e: None, baseline=base, expected_tokens=end.completion_tokens
        )
        await client.aclose()
        await scraper.aclose()
        return base, generation_tokens(after.samples)

    base, after = asyncio.run(go())
    assert after - base == 40
