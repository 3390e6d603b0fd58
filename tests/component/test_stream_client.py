"""The stream client against the simulator (and a canned vLLM-shaped stream for reasoning and
per-request speculative metrics): what it sends, what it emits, how requests end."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from specmon.core.clock import FakeClock
from specmon.core.credentials import resolve_api_key
from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.recording_format import EventEncoder
from specmon.sources.stream_client import (
    ChatRequest,
    StreamClient,
    server_base,
)

KEY = "sk-test-planted-abcdef123456"


def _chat(url: str, request: ChatRequest, **client_kwargs) -> list:
    events: list = []

    async def go() -> None:
        async with StreamClient(url, **client_kwargs) as client:
            await client.chat(request, events.append)

    asyncio.run(go())
    return events


def test_a_request_emits_start_chunks_and_end_with_cumulative_usage(sim):
    events = _chat(sim.url, ChatRequest("Explain DFlash.", max_tokens=48, temperature=0.0))
    start, *chunks, end = events
    assert isinstance(start, RequestStarted) and isinstance(end, RequestEnded)
    assert all(isinstance(c, StreamChunk) for c in chunks)
    assert start.model == "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"  # from /v1/models
    assert (start.max_tokens, start.temperature) == (48, 0.0)
    assert chunks[0].role == "assistant"
    counts = [c.completion_tokens for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 48  # cumulative, continuous usage
    assert end.outcome == "ok" and end.completion_tokens == 48
    assert end.finish_reason == "length"
    assert "".join(c.text for c in chunks).strip()
    # several tokens per chunk: speculation is visible client side
    steps = [b - a for a, b in itertools.pairwise(counts[1:])]
    assert max(steps) > 1


def test_timestamps_come_from_the_injected_clock(sim):
    clock = FakeClock(100.0)
    events = _chat(sim.url, ChatRequest("hi", max_tokens=8), clock=clock)
    assert {e.t for e in events} == {100.0}


def test_model_system_prompt_and_sampling_controls_are_passed_through(canned):
    server = canned(_canned_chunks())
    _chat(
        server.url,
        ChatRequest("q", system="be brief", model="m2", max_tokens=7, temperature=0.5, top_p=0.9),
    )
    body = server.requests[0]
    assert body["model"] == "m2"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
    ]
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (7, 0.5, 0.9)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def _canned_chunks() -> list[dict]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict, n: int, finish: str | None = None) -> dict:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n},
        }

    spec = {
        "mean_acceptance_length": 2.5,
        "draft_acceptance_rate": 0.375,
        "acceptance_histogram": [0, 1, 1, 0, 0],
        "num_spec_steps": 2,
        "num_accepted_draft_tokens": 3,
        "num_draft_tokens": 8,
        "num_spec_tokens": 4,
    }
    return [
        chunk({"role": "assistant", "content": ""}, 0),
        chunk({"reasoning": "think "}, 1),
        chunk({"reasoning_content": "more"}, 3),
        chunk({"content": "Answer"}, 5),
        chunk({"content": "."}, 6, "stop"),
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
            "metrics": {"speculative_decoding": spec},
        },
    ]


def test_reasoning_fields_and_per_request_spec_metrics_are_kept(canned):
    server = canned(_canned_chunks())
    events = _chat(server.url, ChatRequest("q"))
    chunks = [e for e in events if isinstance(e, StreamChunk)]
    assert [c.reasoning for c in chunks] == ["", "think ", "more", "", ""]
    assert "".join(c.text for c in chunks) == "Answer."
    assert len(chunks) == 5  # the usage-only message is not a chunk: it ends the request
    end = events[-1]
    assert end.outcome == "ok" and end.completion_tokens == 6 and end.prompt_tokens == 5
    assert end.spec_decoding is not None
    assert end.spec_decoding["num_spec_steps"] == 2
    assert end.spec_decoding["acceptance_histogram"] == [0, 1, 1, 0, 0]


def test_a_stream_that_stops_without_finish_reason_is_failed(canned):
    server = canned(_canned_chunks()[:3])  # no finish_reason, then [DONE]
    end = _chat(server.url, ChatRequest("q"))[-1]
    assert end.outcome == "failed"
    assert "before the response finished" in end.error
    assert end.completion_tokens == 3


def test_simulated_server_is_detected_from_version_and_header(sim):
    async def go():
        async with StreamClient(sim.url) as client:
            ident = await client.identify()
            return ident, client.simulated

    ident, flag = asyncio.run(go())
    assert ident.simulated is True and flag is True
    assert ident.session_info().simulated is True
    assert ident.n_spec == 8
    assert ident.models == ("cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",)


def test_a_real_looking_server_is_not_simulated(canned):
    server = canned(_canned_chunks())

    async def go():
        async with StreamClient(server.url) as client:
            ident = await client.identify()
            await client.chat(ChatRequest("q"), lambda e: None)
            return ident, client.simulated

    ident, flag = asyncio.run(go())
    assert ident.simulated is False and not flag
    assert ident.vllm_version == "0.11.0" and ident.error is None


def test_api_key_is_sent_but_never_emitted(canned):
    server = canned(_canned_chunks())
    events = _chat(server.url, ChatRequest("q"), api_key=KEY)
    assert server.headers[-1]["authorization"] == f"Bearer {KEY}"
    encoder = EventEncoder()
    dumped = json.dumps([encoder.encode(e) for e in events]) + repr(events)
    assert KEY not in dumped


def test_api_key_from_environment_in_order():
    assert resolve_api_key("explicit", {"OPENAI_API_KEY": "a", "VLLM_API_KEY": "b"}) == "explicit"
    assert resolve_api_key(None, {"OPENAI_API_KEY": "a", "VLLM_API_KEY": "b"}) == "a"
    assert resolve_api_key(None, {"VLLM_API_KEY": "b"}) == "b"
    assert resolve_api_key(None, {}) is None


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("https://h/proxy/v1/", "https://h/proxy"),
        ("h:8000", "http://h:8000"),
        ("https://user:pw@h:443", "https://h:443"),
    ],
)
def test_server_base_normalises_urls(url, base):
    assert server_base(url) == base


@pytest.mark.parametrize("url", ["", "ftp://h", "http://", "http://h:notaport"])
def test_bad_urls_are_refused_with_a_message(url):
    with pytest.raises(ValueError, match="URL"):
        server_base(url)


# ------------------------------------------------------------------ faults: the resulting state


def _fault(sim, spec: str, **kwargs) -> list:
    request = ChatRequest("tell me", max_tokens=64, extra_body={"specmon_fault": spec}, **kwargs)
    return _chat(sim.url, request)


def test_connection_dropped_mid_stream_marks_failed_and_keeps_the_tokens(sim):
    events = _fault(sim, "drop-after=20")
    end = events[-1]
    chunks = [e for e in events if isinstance(e, StreamChunk)]
    assert end.outcome == "failed"
    assert end.error
    assert chunks, "the chunks that arrived before the drop are kept"
    assert end.completion_tokens == chunks[-1].completion_tokens
    assert 0 < end.completion_tokens <= 64
    assert end.finish_reason is None


def test_http_5xx_marks_failed_with_the_status(sim):
    events = _fault(sim, "error=503")
    assert [type(e) for e in events] == [RequestStarted, RequestEnded]
    assert events[-1].outcome == "failed"
    assert "503" in events[-1].error


def test_cancel_during_a_stall_ends_the_request_cancelled_and_keeps_chunks(sim):
    events: list = []
    seen_first = asyncio.Event()

    def emit(e):
        events.append(e)
        if isinstance(e, StreamChunk) and e.completion_tokens:
            seen_first.set()

    async def go():
        async with StreamClient(sim.url) as client:
            request = ChatRequest(
                "tell me", max_tokens=64, extra_body={"specmon_fault": "stall=3000@1"}
            )
            task = asyncio.create_task(client.chat(request, emit))
            await seen_first.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    end = events[-1]
    assert isinstance(end, RequestEnded)
    assert end.outcome == "cancelled"
    assert end.completion_tokens is not None and end.completion_tokens >= 1
    assert any(isinstance(e, StreamChunk) and e.text for e in events)


def test_a_server_that_is_not_there_fails_the_request_clearly():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    events = _chat(f"http://127.0.0.1:{port}", ChatRequest("q", model="m"), api_key=KEY)
    assert events[-1].outcome == "failed"
    assert "127.0.0.1" in events[-1].error
    assert KEY not in events[-1].error


def test_usage_counts_that_are_not_counts_are_dropped_not_passed_on(canned):
    # A non-conforming server sends text, lists or negative numbers as token counts. They must not
    # reach the session state (its fold compared them with ints and raised, losing the request), the
    # prompt loop's end-of-request scrape, nor a recording (whose reader refuses such a chunk).
    from specmon.core.events import SessionInfo
    from specmon.core.session_state import SessionState

    chunks = _canned_chunks()
    chunks[1]["usage"]["completion_tokens"] = "one"
    chunks[2]["usage"]["completion_tokens"] = -3
    chunks[3]["usage"]["prompt_tokens"] = "many"
    chunks[5]["usage"]["completion_tokens"] = "six"
    chunks[5]["usage"]["prompt_tokens"] = [5]
    server = canned(chunks)
    events = _chat(server.url, ChatRequest("q"))
    counts = [(e.completion_tokens, e.prompt_tokens) for e in events if isinstance(e, StreamChunk)]
    assert counts == [(0, 5), (None, 5), (None, 5), (5, None), (6, 5)]
    end = events[-1]
    assert end.outcome == "ok"
    assert end.completion_tokens == 6 and end.prompt_tokens == 5  # the last valid counts
    state = SessionState(SessionInfo())
    for e in events:
        state.apply(e)
    rows = state.snapshot()["requests"]["rows"]
    assert [r["outcome"] for r in rows] == ["ok"]
    assert rows[0]["completion_tokens"] == 6


def test_identify_gives_up_on_a_server_that_never_answers(monkeypatch):
    import socket

    from specmon.sources import stream_client

    monkeypatch.setattr(stream_client, "IDENTIFY_TIMEOUT_S", 0.3)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts connections, never reads or answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"

        async def go():
            client = StreamClient(url, clock=FakeClock())
            try:
                return await asyncio.wait_for(client.identify(), 30)
            finally:
                await client.aclose()

        identity = asyncio.run(go())
    assert identity.models == () and identity.vllm_version is None
    assert "/version" in identity.error and "/v1/models" in identity.error


def test_the_simulator_s_per_request_timing_metrics_reach_the_answer_s_stats():
    """End to end: a server with --enable-per-request-metrics sends the timing fields in the
    final usage chunk; the client keeps them and the stats split the TTFT."""
    from specmon.core.stream_stats import RequestTrace, request_stats
    from specmon.sim.server import SimConfig, start_in_thread

    config = SimConfig(speed=50.0, n_spec=8, seed=1, enable_per_request_metrics=True)
    with start_in_thread(config, log_sink=lambda _l: None) as server:
        events = _chat(server.url, ChatRequest("hi", max_tokens=24, temperature=0.0))
    end = events[-1]
    assert isinstance(end, RequestEnded) and end.server_timing is not None
    assert set(end.server_timing) >= {"time_to_first_token_ms", "queue_time_ms", "mean_itl_ms"}
    trace = RequestTrace(end.request_id)
    for e in events:
        trace.add(e)
    stats = request_stats(trace, n_spec=8)
    assert stats.ttft_split is not None and stats.server_timing is not None
    assert stats.server_timing.queue_s == 0.0  # the simulator schedules on arrival
    assert stats.ttft_split.server_ttft_s <= stats.ttft_split.client_ttft_s


def test_without_the_server_flag_there_are_no_timing_metrics(sim):
    end = _chat(sim.url, ChatRequest("hi", max_tokens=8))[-1]
    assert isinstance(end, RequestEnded) and end.server_timing is None
