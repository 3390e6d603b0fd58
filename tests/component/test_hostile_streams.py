"""Hostile streams against the stream client's two transports (aiohttp, what every command
streams with, and httpx, what tests give it), from a loopback server that writes whatever the
test says: one endless line, a stream that never ends, one that stalls, malformed chunks, a last
event torn off its blank line. Each ends as a failed request with a one-line reason, in bounded
memory, keeping what arrived before; both transports end the same stream the same way."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.support.hostile_stream import ROLE, Body, HostileServer, content, event, send

from specmon.core.events import RequestEnded, StreamChunk
from specmon.sources.stream_client import ChatRequest, StreamClient

GUARD_S = 60.0
"""A hang guard only (a broken client would never return); nothing is asserted about time."""


@pytest.fixture
def serve() -> Iterator[Callable[..., HostileServer]]:
    servers: list[HostileServer] = []

    def start(body: Body, **kwargs: Any) -> HostileServer:
        server = HostileServer(body, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


CLIENTS = ("aiohttp", "httpx")


def run_chat(
    kind: str, url: str, request: ChatRequest | None = None, **limits: Any
) -> tuple[RequestEnded, list[StreamChunk]]:
    """One request through the client `kind`; the limits given (if any) as a StreamLimits."""
    events: list[Any] = []
    kwargs: dict[str, Any] = {}
    if limits:
        from specmon.core.stream_limits import StreamLimits

        kwargs["limits"] = StreamLimits(**limits)
    request = request or ChatRequest("hi", model="m")

    async def go() -> RequestEnded:
        if kind == "httpx":
            import httpx

            kwargs["transport"] = httpx.AsyncHTTPTransport()
        client = StreamClient(url, **kwargs)
        try:
            return await asyncio.wait_for(client.chat(request, events.append), GUARD_S)
        finally:
            await client.aclose()

    ended = asyncio.run(go())
    assert events[-1] == ended
    return ended, [e for e in events if isinstance(e, StreamChunk)]


# ---------------------------------------------------------------- 1. one endless line


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_endless_line_fails_the_request_in_bounded_memory(serve, kind):
    block = b"x" * 65536
    sent = 24 << 20  # 24 MiB in one line

    async def body(reader, writer) -> None:
        await send(writer, event(ROLE) + event(content("kept", 1)))
        await send(writer, b'data: {"choices": [{"delta": {"content": "')
        for _ in range(sent // len(block)):
            await send(writer, block)

    server = serve(body)
    tracemalloc.start()
    try:
        ended, chunks = run_chat(kind, server.url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ended.outcome == "failed"
    assert ended.error == "stream line over 1 MiB"
    assert [c.text for c in chunks] == ["", "kept"]  # what came before the line is kept
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB while a {sent >> 20} MiB line arrived"


# ---------------------------------------------------------------- 2. a stream that never ends


def _forever(make: Callable[[int], bytes]) -> Body:
    async def body(reader, writer) -> None:
        await send(writer, event(ROLE))
        n = 0
        while True:  # until the client hangs up (send raises ConnectionError)
            n += 1
            await send(writer, make(n))

    return body


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_endless_stream_ends_at_the_requests_max_tokens(serve, kind):
    server = serve(_forever(lambda n: event(content("tok ", n))))
    ended, chunks = run_chat(kind, server.url, ChatRequest("hi", model="m", max_tokens=40))
    assert ended.outcome == "failed"
    assert ended.error == "answer over 40 tokens"
    assert ended.completion_tokens == 41  # the count that passed the limit is reported
    assert "".join(c.text for c in chunks) == "tok " * 40


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_endless_stream_of_empty_chunks_ends_at_the_default_token_cap(serve, kind):
    server = serve(_forever(lambda n: event({"choices": [{"index": 0, "delta": {}}]})))
    ended, chunks = run_chat(kind, server.url, max_answer_tokens=30)
    assert ended.outcome == "failed"
    assert ended.error == "answer over 30 tokens (counted in chunks)"
    assert len(chunks) == 30 + 2  # the role chunk and a usage chunk may carry no token


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_endless_stream_of_text_ends_at_the_byte_cap(serve, kind):
    server = serve(_forever(lambda n: event(content("é" * 500))))  # 1000 bytes a chunk
    ended, chunks = run_chat(kind, server.url, max_answer_bytes=16 << 10)
    assert ended.outcome == "failed"
    assert ended.error == "answer over 16 KiB of text"
    shown = "".join(c.text for c in chunks)
    assert len(shown.encode()) == 16_000  # every chunk that fitted, none past the cap


# ---------------------------------------------------------------- 3. a stream that stalls


def _stall_after(*events: bytes) -> Body:
    async def body(reader, writer) -> None:
        for e in events:
            await send(writer, e)
        await reader.read()  # nothing more, until the client hangs up

    return body


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_stalled_stream_fails_after_the_idle_timeout_keeping_what_came(serve, kind):
    server = serve(_stall_after(event(ROLE), event(content("before the stall", 3))))
    ended, chunks = run_chat(kind, server.url, idle_timeout_s=0.3)
    assert ended.outcome == "failed"
    assert ended.error == "no data from the server for 0.3 s"
    assert [c.text for c in chunks] == ["", "before the stall"]
    assert ended.completion_tokens == 3


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_server_that_sends_no_body_or_no_head_fails_after_the_idle_timeout(serve, kind):
    for server in (serve(_stall_after()), serve(_stall_after(), head=False)):
        ended, chunks = run_chat(kind, server.url, idle_timeout_s=0.3)
        assert (ended.outcome, ended.error) == ("failed", "no data from the server for 0.3 s")
        assert chunks == []


# ---------------------------------------------------------------- 4. malformed chunks


MALFORMED = [
    ({"choices": ["oops"]}, "chunk 2: `choices[0]` is a string, expected an object"),
    ({"choices": {"0": {}}}, "chunk 2: `choices` is an object, expected a list"),
    ({"choices": [{"delta": "hi"}]}, "chunk 2: `choices[0].delta` is a string, expected an object"),
    (
        {"choices": [{"delta": {"content": 7}}]},
        "chunk 2: `choices[0].delta.content` is a number, expected a string",
    ),
    (
        {"choices": [{"delta": {}, "finish_reason": ["stop"]}]},
        "chunk 2: `choices[0].finish_reason` is a list, expected a string",
    ),
    ({"usage": 12, "choices": []}, "chunk 2: `usage` is a number, expected an object"),
    ([1, 2], "chunk 2 is a list, expected a JSON object"),
    ("[b]bold[/b]", "chunk 2 is a string, expected a JSON object"),
    (
        {"error": {"message": "out of [red]memory[/red]", "code": 500}},
        "the server reported an error in the stream: out of [red]memory[/red]",
    ),
]


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize(("chunk", "message"), MALFORMED)
def test_a_malformed_chunk_is_described_not_a_python_error(serve, kind, chunk, message):
    body = _stall_after(
        event(ROLE), event(chunk), event(content("", 1, "stop")), b"data: [DONE]\n\n"
    )
    ended, _ = run_chat(kind, serve(body).url)
    assert (ended.outcome, ended.error) == ("failed", message)


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_chunk_that_is_not_json_says_so(serve, kind):
    body = _stall_after(event(ROLE), b"data: {not json\n\n", b"data: [DONE]\n\n")
    ended, _ = run_chat(kind, serve(body).url)
    assert ended.outcome == "failed"
    assert ended.error is not None and ended.error.startswith("chunk 2 is not JSON (")


# ------------------------------------------------ 5. a last event without its blank line


def test_a_last_event_without_its_blank_line_is_dropped_by_both_clients_alike(serve):
    """The SSE rule (core/sse.py): an event the stream does not end with a blank line is not
    dispatched, so the finish reason it carried never arrived: failed, in chat and bench."""

    async def body(reader, writer) -> None:
        await send(writer, event(ROLE) + event(content("all", 1)))
        await send(writer, f"data: {json.dumps(content('', 2, 'stop'))}\n".encode())

    server = serve(body)
    results = [run_chat(kind, server.url) for kind in CLIENTS]
    for ended, chunks in results:
        assert ended.outcome == "failed"
        assert ended.error is not None and "stream ended inside an event" in ended.error
        assert [c.text for c in chunks] == ["", "all"]
    assert results[0][0].error == results[1][0].error


def test_a_complete_stream_is_ok_in_both_clients(serve):
    """The control: the same stream with its blank line and [DONE] is a finished answer."""

    async def body(reader, writer) -> None:
        await send(writer, event(ROLE) + event(content("all", 1)))
        await send(writer, event(content("", 2, "stop")) + b"data: [DONE]\n\n")

    server = serve(body)
    for kind in CLIENTS:
        ended, _ = run_chat(kind, server.url)
        assert (ended.outcome, ended.finish_reason, ended.error) == ("ok", "stop", None)
