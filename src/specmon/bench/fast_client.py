"""A lean streaming client for bench: aiohttp and json, no SDK objects per chunk.

It emits exactly the events `sources.stream_client.StreamClient.chat` emits (RequestStarted,
StreamChunk per choice message, RequestEnded with the usage message's arrival time, counts and
vLLM's per-request `metrics.speculative_decoding`): both hand the body's bytes to the same reader,
`sources.stream_reader.read_stream` (the SSE rules, the chunk checks, the stream limits, the
arrival times). Cancellation ends the request as "cancelled"; no byte for the idle timeout ends it
as "failed" (aiohttp's per-read timeout); the API key never appears in an event or an error text.
tests/bench/test_bench_truth.py runs both clients on the same recorded traces and requires
identical numbers.

Why: the OpenAI SDK builds pydantic objects for every chunk. On the project's 2-core machine that
cost 3-4.4x the CPU per streamed token of a bare httpx loop, so at concurrency 16 the SDK client,
not the server, set the pace (benchmarks/bench_client.py; docs/benchmarks.md). A load generator
must never be the bottleneck it measures. The transport is aiohttp (a C HTTP parser): httpx's
pure-Python h11 stack cost about as much CPU per message as everything else together, and `vllm
bench serve`'s client is aiohttp too (benchmarks/bench_client.py compares them). An httpx transport
can still be given (tests replay recorded streams through httpx.MockTransport); both paths feed the
same byte-level SSE reader. (This belongs next to StreamClient in sources/ eventually; it lives in
bench/ while sources/ is being reworked.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import (
    Emit,
    RequestEnded,
    RequestStarted,
)
from specmon.core.redaction import redact_text
from specmon.core.sse import StreamFormatError
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits, idle_message
from specmon.sources.stream_client import (
    SIMULATED_HEADER,
    ChatRequest,
    new_request_id,
    resolve_api_key,
    server_base,
)
from specmon.sources.stream_reader import StreamState, read_stream


class FastStreamClient:
    """Streams chat completions with aiohttp (or a given httpx transport, for tests); the same
    events as StreamClient.chat."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        clock: Clock = monotonic_clock,
        limits: StreamLimits = DEFAULT_LIMITS,
        connect_timeout: float = 10.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = server_base(url)
        self.source = self.base_url
        self._key = resolve_api_key(api_key)
        self._clock = clock
        self._headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self.limits = limits
        self._timeout = limits.idle_timeout_s  # no byte for this long: the request failed
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._http: httpx.AsyncClient | None = None
        if transport is not None:
            self._http = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(limits.idle_timeout_s, connect=connect_timeout),
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
        state = StreamState(
            limits=self.limits, token_limit=self.limits.token_limit(request.max_tokens)
        )
        url = self.base_url + "/v1/chat/completions"
        body = json.dumps(request.body(model)).encode()
        try:
            if self._http is not None:
                async with self._http.stream(
                    "POST", url, content=body, headers={"content-type": "application/json"}
                ) as resp:
                    failed = await self._begin(resp.status_code, resp.headers, resp.aread)
                    if failed is None:
                        await read_stream(resp.aiter_bytes(), rid, state, emit, clock)
            else:
                async with self._aiohttp().post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as aresp:
                    failed = await self._begin(aresp.status, aresp.headers, aresp.read)
                    if failed is None:
                        await read_stream(aresp.content.iter_any(), rid, state, emit, clock)
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
        if isinstance(exc, StreamFormatError):
            return self._clean(str(exc))
        if isinstance(exc, aiohttp.SocketTimeoutError | httpx.ReadTimeout):
            return idle_message(self.limits.idle_timeout_s)
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
