"""A lean streaming client for bench: aiohttp and json, no SDK objects per chunk.

It emits exactly the events `sources.stream_client.StreamClient.chat` emits (RequestStarted,
StreamChunk per choice message, RequestEnded with the usage message's arrival time, counts and
vLLM's per-request `metrics.speculative_decoding`), with the same rules: the clock is read the
moment the network read that completes a data message returns, before anything is parsed (the
messages of one read share that arrival time: they arrived together); a stream that ends without
a finish reason is
"failed"; cancellation ends the request as "cancelled"; the API key never appears in an event or
an error text. tests/bench/test_bench_truth.py runs both clients on the same recorded traces and
requires identical numbers.

Why: the OpenAI SDK builds pydantic objects for every chunk. On the project's 2-core machine that
cost 3-4.4x the CPU per streamed token of a bare httpx loop, so at concurrency 16 the SDK
client, not the server, set the pace (benchmarks/bench_client.py; docs/benchmarks.md). A load
generator must never be the bottleneck it measures. The transport is aiohttp (a C HTTP parser):
httpx's pure-Python h11 stack cost about as much CPU per message as everything else together, and
`vllm bench serve`'s client is aiohttp too (benchmarks/bench_client.py compares them). An httpx
transport can still be given (tests replay recorded streams through httpx.MockTransport); both
paths feed the same byte-level SSE reader. (This belongs next to StreamClient in sources/
eventually; it lives in bench/ while sources/ is being reworked.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import (
    Emit,
    RequestEnded,
    RequestStarted,
    StreamChunk,
)
from specmon.core.redaction import redact_text
from specmon.sources.stream_client import (
    SIMULATED_HEADER,
    ChatRequest,
    StreamState,
    new_request_id,
    resolve_api_key,
    server_base,
    token_count,
)

_loads = json.JSONDecoder().decode


class FastStreamClient:
    """Streams chat completions with aiohttp (or a given httpx transport, for tests); the same
    events as StreamClient.chat."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        clock: Clock = monotonic_clock,
        timeout: float = 3600.0,
        connect_timeout: float = 10.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = server_base(url)
        self.source = self.base_url
        self._key = resolve_api_key(api_key)
        self._clock = clock
        self._headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._http: httpx.AsyncClient | None = None
        if transport is not None:
            self._http = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(timeout, connect=connect_timeout),
                transport=transport,
            )
        self._session: aiohttp.ClientSession | None = None
        self._secrets = (self._key,) if self._key else ()
        self.simulated: bool | None = None

    def _aiohttp(self) -> aiohttp.ClientSession:
        """The session, made on first use (inside the running loop, as aiohttp requires)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self._connect_timeout, sock_read=self._timeout
                ),
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    ssl=self.base_url.startswith("https://"),
                ),
            )
        return self._session

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _clean(self, text: str) -> str:
        return redact_text(" ".join(text.split()), self._secrets)

    async def chat(
        self, request: ChatRequest, emit: Emit, *, request_id: str | None = None
    ) -> RequestEnded:
        """Stream one chat completion (the model must be given: bench resolves it once)."""
        clock = self._clock
        rid = request_id or new_request_id()
        model = request.model or ""
        emit(
            RequestStarted(
                t=clock(),
                request_id=rid,
                source=self.source,
                model=model,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                prompt_chars=sum(len(m["content"]) for m in request.chat_messages()),
            )
        )
        state = StreamState()
        url = self.base_url + "/v1/chat/completions"
        body = json.dumps(request.body(model)).encode()
        try:
            if self._http is not None:
                async with self._http.stream(
                    "POST", url, content=body, headers={"content-type": "application/json"}
                ) as resp:
                    failed = await self._begin(resp.status_code, resp.headers, resp.aread)
                    if failed is None:
                        await self._read(resp.aiter_bytes(), rid, state, emit)
            else:
                async with self._aiohttp().post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as aresp:
                    failed = await self._begin(aresp.status, aresp.headers, aresp.read)
                    if failed is None:
                        await self._read(aresp.content.iter_any(), rid, state, emit)
            if failed is not None:
                ended = state.end(clock(), rid, "failed", failed)
                emit(ended)
                return ended
        except asyncio.CancelledError:
            emit(state.end(clock(), rid, "cancelled", None))
            raise
        except Exception as exc:
            ended = state.end(clock(), rid, "failed", self._describe(exc))
            emit(ended)
            return ended
        ended = state.end_of_stream(clock(), rid)
        emit(ended)
        return ended

    async def _begin(self, status: int, headers: Mapping[str, str], read: Any) -> str | None:
        """The response head: None to go on streaming, else the failure text (body read)."""
        if headers.get(SIMULATED_HEADER) == "1":
            self.simulated = True
        if status >= 400:
            return self._status(status, await read())
        return None

    async def _read(
        self, chunks: AsyncIterator[bytes], rid: str, state: StreamState, emit: Emit
    ) -> None:
        """SSE over raw bytes: every complete `data:` line is one message, timestamped with the
        arrival of the read that completed it."""
        clock = self._clock
        pending = b""
        on_message = self._on_message
        async for chunk in chunks:
            t = clock()  # arrival, before any other work
            if b"\n" not in chunk:
                pending += chunk
                continue
            lines = (pending + chunk if pending else chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:]  # json skips the leading space itself
                if payload.strip() == b"[DONE]":
                    return
                on_message(t, rid, payload, state, emit)
        line = pending.strip()
        if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
            self._on_message(clock(), rid, line[5:].strip(), state, emit)

    def _on_message(
        self, t: float, rid: str, payload: bytes, state: StreamState, emit: Emit
    ) -> None:
        data = _loads(payload.decode("utf-8"))  # str: json skips its encoding detection
        if type(data) is not dict:
            raise ValueError("a stream message that is not a JSON object")
        state.last_t = t
        usage = data.get("usage")
        completion = prompt = None
        if type(usage) is dict:
            completion = usage.get("completion_tokens")
            if type(completion) is not int or completion < 0:  # the common case inline
                completion = token_count(completion)
            prompt = usage.get("prompt_tokens")
            if type(prompt) is not int or prompt < 0:
                prompt = token_count(prompt)
            if completion is not None:
                state.completion_tokens = completion
            if prompt is not None:
                state.prompt_tokens = prompt
        metrics = data.get("metrics")
        if metrics is not None and type(metrics) is dict:
            spec = metrics.get("speculative_decoding")
            if isinstance(spec, dict):
                state.spec_decoding = spec
        choices = data.get("choices")
        if not choices or type(choices) is not list or type(choices[0]) is not dict:
            return
        choice = choices[0]
        delta = choice.get("delta")
        text = reasoning = ""
        role = None
        if type(delta) is dict:
            content = delta.get("content")
            text = content if type(content) is str else ""
            r = delta.get("role")
            role = r if type(r) is str else None
            thought = delta.get("reasoning") or delta.get("reasoning_content")
            reasoning = thought if type(thought) is str else ""
        finish = choice.get("finish_reason")
        if finish is not None:
            if type(finish) is str:
                state.finish_reason = finish
            else:
                finish = None
        # Positional, in field order: t, request_id, text, reasoning, role, completion_tokens,
        # prompt_tokens, finish_reason.
        emit(StreamChunk(t, rid, text, reasoning, role, completion, prompt, finish))

    def _status(self, status: int, raw: bytes) -> str:
        message = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(message)
            err = body.get("error") if isinstance(body, dict) else None
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                message = err["message"]
            elif isinstance(body, dict) and isinstance(body.get("detail"), str):
                message = body["detail"]
        except ValueError:
            pass
        return self._clean(f"HTTP {status}: {message[:500]}")

    def _describe(self, exc: BaseException) -> str:
        if isinstance(
            exc,
            httpx.ConnectError
            | httpx.RemoteProtocolError
            | httpx.ReadError
            | aiohttp.ClientConnectionError
            | aiohttp.ClientPayloadError,
        ):
            return self._clean(f"connection to {self.source} failed: {type(exc).__name__}: {exc}")
        return self._clean(f"{type(exc).__name__}: {exc}")
