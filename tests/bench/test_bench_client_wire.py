"""The stream client's aiohttp path against a real socket: SSE messages split across network reads
and several in one read give the same events as one message per read; an HTTP error names the
status and never the API key; a stream cut before its finish reason is a failed request; every
request sends the request's body and the key as a bearer token (bench's too), and the key is
never recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from specmon.core.events import RequestEnded, StreamChunk
from specmon.sources.stream_client import ChatRequest, StreamClient

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sse"
KEY = "sk-wire-0123456789abcdef"

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def serve(write_body: Writer, *, status: str = "200 OK") -> tuple[asyncio.Server, str]:
    """A one-purpose HTTP/1.1 server: reads the request, answers with a chunked body that
    `write_body` writes (each writer.write is one HTTP chunk, flushed at once)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(
            f"HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\n"
            "transfer-encoding: chunked\r\nconnection: close\r\n\r\n".encode()
        )
        await write_body(writer)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


async def stream(body: bytes, split: Callable[[bytes], list[bytes]]) -> list[object]:
    async def write(writer: asyncio.StreamWriter) -> None:
        for piece in split(body):
            chunk(writer, piece)
            await writer.drain()
            # Separate network reads. The client stops reading at [DONE] and may close while
            # the last pauses run: the server's task then ends quietly.
            try:
                await asyncio.sleep(0.005)
            except asyncio.CancelledError:
                return
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server, url = await serve(write)
    async with server:
        client = StreamClient(url)
        events: list[object] = []
        await client.chat(ChatRequest(prompt="p", model="tiny", max_tokens=24), events.append)
        await client.aclose()
    return events


def shape(events: list[object]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, StreamChunk):
            out.append(("chunk", e.text, e.role, e.completion_tokens, e.finish_reason))
        elif isinstance(e, RequestEnded):
            out.append(("end", e.outcome, e.completion_tokens, e.prompt_tokens, e.finish_reason))
    return out


async def test_messages_split_or_merged_across_reads_give_the_same_events() -> None:
    body = (GOLDEN / "draft_noised-chat-t0-continuous.sse").read_bytes()
    messages = [m + b"\n\n" for m in body.split(b"\n\n") if m.strip()]
    one_each = shape(await stream(body, lambda _b: messages))
    halves = shape(
        await stream(body, lambda _b: [p for m in messages for p in (m[:7], m[7:])])
    )  # every message cut inside its JSON
    merged = shape(
        await stream(body, lambda _b: [b"".join(messages[i : i + 3]) for i in range(0, 99, 3)])
    )  # three messages per read
    assert one_each[-1][0] == "end" and one_each[-1][1] == "ok"
    with_choices = sum(1 for m in messages if b'"choices":[{' in m)  # not the usage-only one
    assert with_choices >= 10
    assert sum(1 for x in one_each if x[0] == "chunk") == with_choices
    assert halves == one_each
    assert merged == one_each


async def test_an_http_error_names_the_status_and_never_the_key() -> None:
    async def write(writer: asyncio.StreamWriter) -> None:
        chunk(writer, f'{{"error": {{"message": "bad key {KEY}"}}}}'.encode())
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server, url = await serve(write, status="401 Unauthorized")
    async with server:
        client = StreamClient(url, api_key=KEY)
        events: list[object] = []
        ended = await client.chat(ChatRequest(prompt="p", model="tiny"), events.append)
        await client.aclose()
    assert ended.outcome == "failed"
    assert ended.error is not None and ended.error.startswith("HTTP 401: bad key")
    assert KEY not in repr(events)


async def test_a_stream_cut_before_its_finish_reason_is_a_failed_request() -> None:
    body = (GOLDEN / "draft_noised-chat-t0-continuous.sse").read_bytes()
    messages = [m + b"\n\n" for m in body.split(b"\n\n") if m.strip()]

    async def write(writer: asyncio.StreamWriter) -> None:
        for m in messages[:4]:
            chunk(writer, m)
        await writer.drain()
        writer.transport.abort()  # the connection drops mid-stream

    server, url = await serve(write)
    async with server:
        client = StreamClient(url)
        events: list[object] = []
        ended = await client.chat(ChatRequest(prompt="p", model="tiny"), events.append)
        await client.aclose()
    assert ended.outcome == "failed"
    assert sum(1 for e in events if isinstance(e, StreamChunk)) == 4


# ------------------------------------------------------------ what every request sends


class Recorder:
    """A tiny OpenAI-compatible aiohttp server that keeps every request it gets: /version,
    /v1/models, an empty /metrics page, and a recorded stream for each chat completion."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.runner: Any = None
        self.url = ""

    async def __aenter__(self) -> Recorder:
        from aiohttp import web

        stream = (GOLDEN / "draft_noised-chat-t0-continuous.sse").read_bytes()

        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.seen.append((request.method, request.path, headers, body))
            if request.path == "/version":
                return web.json_response({"version": "0.0-test"})
            if request.path == "/v1/models":
                return web.json_response({"object": "list", "data": [{"id": "tiny"}]})
            if request.path == "/metrics":
                return web.Response(text="", content_type="text/plain")
            if request.path == "/v1/chat/completions":
                return web.Response(body=stream, content_type="text/event-stream")
            return web.Response(status=404)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()

    def chats(self) -> list[tuple[dict[str, str], bytes]]:
        return [(h, b) for m, p, h, b in self.seen if p == "/v1/chat/completions"]


FULL = ChatRequest(
    prompt="and now?",
    system="be brief",
    model="tiny",
    max_tokens=24,
    temperature=0.5,
    top_p=0.9,
    extra_body={"ignore_eos": True},
    messages=(("user", "hi"), ("assistant", "hello")),
)


async def test_a_chat_sends_the_request_s_body_and_the_key_as_a_bearer_token() -> None:
    async with Recorder() as server:
        async with StreamClient(server.url, api_key=KEY) as client:
            ended = await client.chat(FULL, lambda _e: None)
        async with StreamClient(server.url) as client:
            await client.chat(FULL, lambda _e: None)
    assert ended.outcome == "ok", ended.error
    (with_key, body), (without, body_again) = server.chats()
    assert json.loads(body) == json.loads(body_again) == FULL.body("tiny")
    assert json.loads(body)["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and now?"},
    ]
    assert with_key["content-type"] == without["content-type"] == "application/json"
    assert with_key["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in without  # no key: no header (not a placeholder key)


async def test_bench_sends_the_key_on_every_request_and_never_records_it(tmp_path: Path) -> None:
    from specmon.bench.config import BenchConfig
    from specmon.bench.prompts import Prompt
    from specmon.bench.runner import run_bench
    from specmon.bench.servers import endpoint_for

    record = tmp_path / "bench.ndjson"
    config = BenchConfig(num_prompts=2, warmups=0, concurrency=2, output_len=24, model="tiny")
    async with Recorder() as server:
        out = await run_bench(
            endpoint_for(server.url),
            config,
            api_key=KEY,
            record=record,
            prompts=[Prompt("p one", 24), Prompt("p two", 24)],
        )
    paths = {p for _m, p, _h, _b in server.seen}
    assert {"/version", "/v1/models", "/metrics", "/v1/chat/completions"} <= paths
    assert all(h.get("authorization") == f"Bearer {KEY}" for _m, _p, h, _b in server.seen)
    assert len(server.chats()) == 2
    assert out.events and KEY not in repr(out.events)
    assert record.stat().st_size > 0 and KEY.encode() not in record.read_bytes()
