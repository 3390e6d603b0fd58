"""A lean streaming client for bench: httpx and json, no SDK objects per chunk.

It emits exactly the events `sources.stream_client.StreamClient.chat` emits (RequestStarted,
StreamChunk per choice message, RequestEnded with the usage message's arrival time, counts and
vLLM's per-request `metrics.speculative_decoding`), with the same rules: the clock is read the
moment a data message arrives, before it is parsed; a stream that ends without a finish reason is
"failed"; cancellation ends the request as "cancelled"; the API key never appears in an event or
an error text. tests/bench/test_bench_truth.py runs both clients on the same recorded traces and
requires identical numbers.

Why: the OpenAI SDK builds pydantic objects for every chunk. On the project's 2-core machine that
cost 3-4.4x the CPU per streamed token of a bare httpx loop, so at concurrency 16 the SDK
client, not the server, set the pace (benchmarks/bench_client.py; docs/benchmarks.md). A load
generator must never be the bottleneck it measures. (This belongs next to StreamClient in
sources/ eventually; it lives in bench/ while sources/ is being reworked.)
"""

from __future__ import annotations

import asyncio
import json

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


class FastStreamClient:
    """Streams chat completions with httpx; same events as StreamClient.chat."""

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
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )
        self._secrets = (self._key,) if self._key else ()
        self.simulated: bool | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

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
        try:
            async with self._http.stream(
                "POST", self.base_url + "/v1/chat/completions", json=request.body(model)
            ) as resp:
                if resp.headers.get(SIMULATED_HEADER) == "1":
                    self.simulated = True
                if resp.status_code >= 400:
                    raw = await resp.aread()
                    ended = state.end(clock(), rid, "failed", self._status(resp, raw))
                    emit(ended)
                    return ended
                async for line in resp.aiter_lines():
                    t = clock()  # arrival, before any other work
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    self._on_message(t, rid, payload, state, emit)
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

    def _on_message(self, t: float, rid: str, payload: str, state: StreamState, emit: Emit) -> None:
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("a stream message that is not a JSON object")
        state.last_t = t
        usage = data.get("usage")
        completion = prompt = None
        if isinstance(usage, dict):
            completion = token_count(usage.get("completion_tokens"))
            prompt = token_count(usage.get("prompt_tokens"))
            if completion is not None:
                state.completion_tokens = completion
            if prompt is not None:
                state.prompt_tokens = prompt
        metrics = data.get("metrics")
        if isinstance(metrics, dict):
            spec = metrics.get("speculative_decoding")
            if isinstance(spec, dict):
                state.spec_decoding = spec
        choices = data.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        text = reasoning = ""
        role = None
        if isinstance(delta, dict):
            content = delta.get("content")
            text = content if isinstance(content, str) else ""
            r = delta.get("role")
            role = r if isinstance(r, str) else None
            thought = delta.get("reasoning") or delta.get("reasoning_content")
            reasoning = thought if isinstance(thought, str) else ""
        finish = choice.get("finish_reason")
        finish = finish if isinstance(finish, str) else None
        if finish is not None:
            state.finish_reason = finish
        emit(
            StreamChunk(
                t=t,
                request_id=rid,
                text=text,
                reasoning=reasoning,
                role=role,
                completion_tokens=completion,
                prompt_tokens=prompt,
                finish_reason=finish,
            )
        )

    def _status(self, resp: httpx.Response, raw: bytes) -> str:
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
        return self._clean(f"HTTP {resp.status_code}: {message[:500]}")

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, httpx.ConnectError | httpx.RemoteProtocolError | httpx.ReadError):
            return self._clean(f"connection to {self.source} failed: {type(exc).__name__}: {exc}")
        return self._clean(f"{type(exc).__name__}: {exc}")
