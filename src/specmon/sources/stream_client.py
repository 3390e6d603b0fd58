"""The OpenAI-compatible stream client: one streamed chat completion → timestamped events.

The response body's bytes go to `sources.stream_reader.read_stream`, the reader bench's fast client
uses too: each SSE data message is timestamped with the injected clock the moment the network read
that completed it returns, before any other work, and read under the stream limits
(`core.stream_limits`: a 1 MiB line, the answer's size, the idle timeout). The request asks for
`stream_options = {include_usage, continuous_usage_stats}` so every chunk carries the cumulative
`usage.completion_tokens` (exact tokens per engine step), and keeps vLLM's per-request
`metrics.speculative_decoding` from the final usage chunk when present. Cancelling the task ends
the request with outcome "cancelled"; a server that dies mid-stream ends it with outcome "failed"
and the error text, the chunks that arrived stay emitted.

The API key is used for the requests only: it never appears in events, errors or logs.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import Emit, RequestEnded, RequestStarted
from specmon.core.redaction import redact_text
from specmon.core.sse import StreamFormatError
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits, idle_message
from specmon.sources.server_identity import (
    IDENTIFY_TIMEOUT_S,
    SIMULATED_HEADER,
    ServerIdentity,
    identify,
    server_base,
)
from specmon.sources.stream_reader import StreamState, read_stream, token_count

if TYPE_CHECKING:
    import openai

__all__ = [
    "IDENTIFY_TIMEOUT_S",
    "SIMULATED_HEADER",
    "ChatRequest",
    "ServerIdentity",
    "StreamClient",
    "StreamLimits",
    "StreamState",
    "new_request_id",
    "resolve_api_key",
    "server_base",
    "token_count",
]

API_KEY_ENV_VARS: tuple[str, ...] = ("OPENAI_API_KEY", "VLLM_API_KEY")
NO_KEY = "EMPTY"
"""What the client sends when no key is configured (vLLM without --api-key accepts anything)."""


def resolve_api_key(explicit: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to use: the explicit one, else OPENAI_API_KEY, else VLLM_API_KEY, else None."""
    if explicit:
        return explicit
    env = os.environ if environ is None else environ
    for name in API_KEY_ENV_VARS:
        value = env.get(name)
        if value:
            return value
    return None


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

    `clock` gives every timestamp (the hub's session clock in the app, a FakeClock in tests).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        clock: Clock = monotonic_clock,
        limits: StreamLimits = DEFAULT_LIMITS,
        connect_timeout: float = 10.0,
        max_retries: int = 0,
        from_env: bool = True,
    ) -> None:
        self.base_url = server_base(url)
        self.source = self.base_url
        # from_env=False: `api_key` is the whole choice (None: no key), made by a caller that
        # scopes keys to their servers (runtime.monitor); the environment is not consulted.
        self._key = resolve_api_key(api_key) if from_env else (api_key or None)
        self._clock = clock
        self.limits = limits
        self._connect_timeout = connect_timeout
        self._max_retries = max_retries
        self._client: openai.AsyncOpenAI | None = None
        """The SDK's client, made on first use (`sdk()`): importing openai takes ~0.9 s, which
        a session that has not asked anything yet (start-up, `watch`) must not wait for."""
        self._secrets = (self._key,) if self._key else ()
        self._models: tuple[str, ...] | None = None
        self.simulated: bool | None = None
        """True once the server announced itself as simulated (header or /version)."""

    def _clean(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def sdk(self) -> openai.AsyncOpenAI:
        """The SDK's client (imports openai and makes it on the first call)."""
        if self._client is None:
            import openai

            # Every read (the response head, each piece of the body) waits at most the idle
            # timeout: "no byte for N s" is httpx's read timeout.
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url + "/v1",
                api_key=self._key or NO_KEY,
                timeout=openai.Timeout(self.limits.idle_timeout_s, connect=self._connect_timeout),
                max_retries=self._max_retries,
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ models

    async def list_models(self) -> tuple[str, ...]:
        """Model ids from /v1/models (cached after the first success)."""
        if self._models is None:
            page = await self.sdk().models.list()
            self._models = tuple(m.id for m in page.data)
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
        re-raises CancelledError.
        """
        clock = self._clock
        rid = request_id or new_request_id()
        try:
            model = await self.resolve_model(request.model)
        except Exception as exc:
            emit(RequestStarted(t=clock(), request_id=rid, source=self.source, model=""))
            failed = StreamState().end(clock(), rid, "failed", "no model: " + self._describe(exc))
            emit(failed)
            return failed
        kwargs = request.body(model)
        messages = kwargs["messages"]
        if request.extra_body:  # the SDK sends what it does not know through extra_body
            for key in request.extra_body:
                kwargs.pop(key, None)
            kwargs["extra_body"] = dict(request.extra_body)

        prompt_chars = sum(len(m["content"]) for m in messages)
        emit(
            RequestStarted(
                t=clock(),
                request_id=rid,
                source=self.source,
                model=model,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                prompt_chars=prompt_chars,
            )
        )
        state = StreamState(
            limits=self.limits, token_limit=self.limits.token_limit(request.max_tokens)
        )
        try:
            async with self.sdk().chat.completions.with_streaming_response.create(
                **kwargs
            ) as response:
                if response.headers.get(SIMULATED_HEADER) == "1":
                    self.simulated = True
                await read_stream(response.iter_bytes(), rid, state, emit, clock)
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

    def _describe(self, exc: BaseException) -> str:
        """A one-line description of a failure, with any secret scrubbed."""
        import openai  # already imported: the failure came from the SDK's client, or not

        if isinstance(exc, StreamFormatError):
            text = str(exc)
        elif _is_a(exc, "ReadTimeout") or (
            isinstance(exc, openai.APITimeoutError)
            and not _is_a(exc.__cause__ or exc.__context__, "ConnectTimeout")
        ):
            text = idle_message(self.limits.idle_timeout_s)
        elif _is_a(exc, "TransportError"):
            text = f"connection to {self.source} failed: {type(exc).__name__}: {exc}"
        elif isinstance(exc, openai.APIStatusError):
            text = f"HTTP {exc.status_code}: {exc.message}"
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
            text = f"connection to {self.source} failed: {exc.message}{detail}"
        else:
            text = f"{type(exc).__name__}: {exc}"
        return self._clean(" ".join(text.split()))


def _is_a(exc: BaseException | None, name: str) -> bool:
    """Whether `exc` is an httpx exception of the class `name` (by name: the SDK's HTTP stack is
    httpx or its successor httpx2, depending on the SDK's version)."""
    return exc is not None and any(
        c.__name__ == name and c.__module__.startswith("httpx") for c in type(exc).__mro__
    )
