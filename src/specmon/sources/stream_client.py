"""The OpenAI-compatible stream client: one streamed chat completion → timestamped events.

The one streaming client of specmon: chat, demo, the canary, bench and sweep all stream through
`StreamClient`. The request body is `ChatRequest.body` (the same bytes for every caller); the
response body's bytes go to `sources.stream_reader.read_stream`: each SSE data message is
timestamped with the injected clock the moment the network read that completed it returns,
before any other work, and read under the stream limits (`core.stream_limits`: a 1 MiB line, the
answer's size, the idle timeout). The request asks for `stream_options = {include_usage,
continuous_usage_stats}` so every chunk carries the cumulative `usage.completion_tokens` (exact
tokens per engine step), and keeps vLLM's per-request `metrics.speculative_decoding` from the
final usage chunk when present. Cancelling the task ends the request with outcome "cancelled"; no
byte for the idle timeout, or a server that dies mid-stream, ends it with outcome "failed" and
the error text (`sources.http_errors.describe_error`); the chunks that arrived stay emitted.

The transport is aiohttp (a C HTTP parser, imported on the first request, not when a session
starts), with no SDK objects per chunk. The OpenAI SDK streamed here before; it was used only to
POST and read the raw bytes (no retries, no typed response), and cost 2.1-2.5x the CPU per
streamed token (benchmarks/bench_client.py; docs/benchmarks.md "One streaming client"). An httpx
transport can be given instead (tests replay recorded streams through `httpx.MockTransport`).
Redirects are followed as httpx followed them for the SDK; a redirect to another origin carries
no `Authorization` (aiohttp drops it).

The API key is the one the command line resolved (`core.credentials.resolve_api_key`): it is
sent, as `KeyScope` makes the header, to this server's origin only, and never appears in events,
errors or logs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.credentials import KeyScope
from specmon.core.events import Emit, RequestEnded, RequestStarted
from specmon.core.redaction import redact_text
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.sources.http_errors import describe_error
from specmon.sources.server_identity import (
    IDENTIFY_TIMEOUT_S,
    SIMULATED_HEADER,
    ServerIdentity,
    identify,
    server_base,
)
from specmon.sources.stream_reader import StreamState, read_stream, token_count

if TYPE_CHECKING:
    import aiohttp
    import httpx

__all__ = [
    "IDENTIFY_TIMEOUT_S",
    "SIMULATED_HEADER",
    "ChatRequest",
    "ServerIdentity",
    "StreamClient",
    "StreamLimits",
    "StreamState",
    "new_request_id",
    "server_base",
    "token_count",
]

MAX_ERROR_BODY_CHARS = 500
"""How much of an HTTP error's body its one-line description keeps."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat request: the prompt and the sampling controls passed through to the server.

    `messages` (role/content pairs, oldest first) is the conversation before `prompt`: a
    multi-turn chat sends them, then `prompt` as the last user message.
    """

    prompt: str
    system: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    extra_body: Mapping[str, Any] | None = None
    messages: tuple[tuple[str, str], ...] = ()
    drop_on_overflow: bool = False
    """When the server refuses the context as too long (HTTP 400), resend without the oldest
    turn of `messages` (a question and its answer), as the same request (runtime.prompt_loop)."""

    def chat_messages(self) -> list[dict[str, str]]:
        """The messages sent: the system prompt, the conversation, then the prompt."""
        out: list[dict[str, str]] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.extend({"role": role, "content": content} for role, content in self.messages)
        out.append({"role": "user", "content": self.prompt})
        return out

    def body(self, model: str) -> dict[str, Any]:
        """The streamed request's JSON body as vLLM receives it (usage on every chunk, so the
        tokens of each chunk are known; `extra_body` merged last)."""
        body: dict[str, Any] = {
            "model": model,
            "messages": self.chat_messages(),
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        for key in ("max_tokens", "temperature", "top_p"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        if self.extra_body:
            body.update(self.extra_body)
        return body


_ids = itertools.count(1)


def new_request_id() -> str:
    """A session-unique request id (`r1`, `r2`, ...)."""
    return f"r{next(_ids)}"


class StreamClient:
    """Streams chat completions from one OpenAI-compatible server and emits events.

    `api_key`: the key as the command line resolved it (None: no key; the environment is not
    read here). `clock` gives every timestamp (the hub's session clock in the app, a FakeClock in
    tests). `max_connections`: the connection pool's size (bench: its concurrency and a few).
    `transport`: stream through httpx with this transport instead of aiohttp (tests).
    """

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
        self._key = api_key or None
        self._headers = KeyScope.of(self._key, [self.base_url]).bearer_for(self.base_url)
        self._clock = clock
        self.limits = limits
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._session: aiohttp.ClientSession | None = None
        """Made on first use, inside the running loop (as aiohttp requires): importing aiohttp
        is not paid by a session that has not asked anything yet (start-up, `watch`)."""
        self._secrets = (self._key,) if self._key else ()
        self._models: tuple[str, ...] | None = None
        self.simulated: bool | None = None
        """True once the server announced itself as simulated (header or /version)."""

    def _clean(self, text: str) -> str:
        return redact_text(" ".join(text.split()), self._secrets)

    def _aiohttp(self) -> aiohttp.ClientSession:
        """The aiohttp session (imports aiohttp and makes it on the first call)."""
        if self._session is None:
            import aiohttp

            from specmon.sources.tls import verifying_context

            https = self.base_url.startswith("https://")
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                # No byte for the idle timeout: the request failed (aiohttp's per-read timeout).
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    sock_connect=self._connect_timeout,
                    sock_read=self.limits.idle_timeout_s,
                ),
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    # The CA bundle the environment names, as every other specmon client
                    # (sources/tls.py); none loaded for a plain-HTTP server.
                    ssl=verifying_context() if https else True,
                ),
            )
        return self._session

    def _httpx(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(self.limits.idle_timeout_s, connect=self._connect_timeout),
                transport=self._transport,
                follow_redirects=True,
            )
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ models

    async def list_models(self) -> tuple[str, ...]:
        """Model ids from /v1/models (cached after the first success); RuntimeError with the
        server's one-line reason when it cannot be asked."""
        if self._models is None:
            identity = await self.identify()
            if not identity.models and identity.error:
                raise RuntimeError(identity.error)
            self._models = identity.models
        return self._models

    async def resolve_model(self, model: str | None = None) -> str:
        """`model` if given, else the first model the server lists."""
        if model:
            return model
        models = await self.list_models()
        if not models:
            raise RuntimeError(f"{self.source} lists no models at /v1/models")
        return models[0]

    async def identify(self) -> ServerIdentity:
        """Ask /version and /v1/models (sources.server_identity); never raises. Remembers the
        models listed and whether the server announced itself as simulated."""
        identity = await identify(self.base_url, api_key=self._key, timeout=IDENTIFY_TIMEOUT_S)
        if identity.models and self._models is None:
            self._models = identity.models
        if identity.simulated:
            self.simulated = True
        return identity

    # ------------------------------------------------------------ streaming

    async def chat(
        self, request: ChatRequest, emit: Emit, *, request_id: str | None = None
    ) -> RequestEnded:
        """Stream one chat completion, emitting RequestStarted, StreamChunk…, RequestEnded.

        Returns the RequestEnded event. Cancellation emits RequestEnded(outcome="cancelled") and
        re-raises CancelledError. Without `request.model`, the server's first listed model.
        """
        clock = self._clock
        rid = request_id or new_request_id()
        model = request.model
        if not model:
            try:
                model = await self.resolve_model(None)
            except Exception as exc:
                emit(RequestStarted(t=clock(), request_id=rid, source=self.source, model=""))
                nothing = StreamState().end(
                    clock(), rid, "failed", "no model: " + self._describe(exc)
                )
                emit(nothing)
                return nothing
        payload = request.body(model)
        emit(
            RequestStarted(
                t=clock(),
                request_id=rid,
                source=self.source,
                model=model,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                prompt_chars=sum(len(m["content"]) for m in payload["messages"]),
            )
        )
        state = StreamState(
            limits=self.limits, token_limit=self.limits.token_limit(request.max_tokens)
        )
        url = self.base_url + "/v1/chat/completions"
        body = json.dumps(payload).encode()
        try:
            if self._transport is not None:
                async with self._httpx().stream(
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
            ended = state.end(clock(), rid, "cancelled", None)
            emit(ended)
            raise
        except Exception as exc:
            ended = state.end(clock(), rid, "failed", self._describe(exc))
            emit(ended)
            return ended
        ended = state.end_of_stream(clock(), rid)
        emit(ended)
        return ended

    async def _begin(
        self, status: int, headers: Mapping[str, str], read: Callable[[], Awaitable[bytes]]
    ) -> str | None:
        """The response head: None to go on streaming, else the failure text (body read)."""
        if headers.get(SIMULATED_HEADER) == "1":
            self.simulated = True
        if status >= 400:
            return self._clean(status_line(status, await read()))
        return None

    def _describe(self, exc: BaseException) -> str:
        """A one-line description of a failure, with any secret scrubbed."""
        return describe_error(
            exc,
            source=self.source,
            idle_timeout_s=self.limits.idle_timeout_s,
            secrets=self._secrets,
        )


def status_line(status: int, raw: bytes) -> str:
    """`HTTP <status>: <message>`: the OpenAI error's `error.message`, else a `detail` string,
    else the body's first characters."""
    message = raw.decode("utf-8", errors="replace")
    try:
        body = json.loads(message)
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
        elif isinstance(body, dict) and isinstance(body.get("detail"), str):
            message = body["detail"]
        elif isinstance(body, dict) and isinstance(body.get("message"), str):
            message = body["message"]
    except ValueError:
        pass
    return f"HTTP {status}: {message[:MAX_ERROR_BODY_CHARS]}"
