"""One streamed chat completion's bytes → events: the stream client's reader.

`sources.stream_client.StreamClient` (chat, demo, the canary, bench, sweep) hands the response
body's bytes, as they arrive from either of its transports (aiohttp, or httpx in tests), to
`read_stream`; it decodes the server-sent events (`core.sse`: one rule for a torn last event, a
1 MiB line cap), checks each chunk's shape, folds it into the request's `StreamState` and emits
one `StreamChunk` per choice message. So every caller ends the same stream the same way, and a
malformed chunk is described the same way ("chunk 12: `choices[0]` is a string, expected an
object").

Each message is timestamped with the clock read the moment the network read that completed it
returned, before anything is parsed (messages of one read share that time: they arrived
together). A stream that ends before `data: [DONE]` without a finish reason is "failed"; an
answer over its limits (`core.stream_limits`) is ended "failed" with the limit it passed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from specmon.core.clock import Clock
from specmon.core.events import Emit, RequestEnded, RequestOutcome, StreamChunk
from specmon.core.server_timing import TIMING_FIELDS
from specmon.core.sse import SseDecoder, StreamFormatError
from specmon.core.stream_limits import CHUNK_SLACK, DEFAULT_LIMITS, StreamLimits, size_text

_loads = json.JSONDecoder().decode

TORN_LAST_EVENT = (
    "the stream ended inside an event (its last line had no blank line after it), "
    "before the response finished"
)


class AnswerTooLarge(StreamFormatError):
    """The answer passed one of its limits (the message names it)."""


def _kind(value: object) -> str:
    """A JSON value's type in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class ChunkError(StreamFormatError):
    """A chunk that is not what an OpenAI-compatible server sends (the message says how)."""

    @classmethod
    def field(cls, n: int, name: str, value: object, expected: str) -> ChunkError:
        return cls(f"chunk {n}: `{name}` is {_kind(value)}, expected {expected}")


@dataclass
class StreamState:
    """What a stream has told so far (the client's own bookkeeping, kept for RequestEnded)."""

    last_t: float | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    spec_decoding: dict[str, Any] | None = None
    server_timing: dict[str, Any] | None = None
    limits: StreamLimits = field(default=DEFAULT_LIMITS, repr=False)
    token_limit: int = DEFAULT_LIMITS.max_answer_tokens
    """The most tokens (and, with `CHUNK_SLACK`, choice messages) the answer may have."""
    messages: int = 0
    """Data messages read (the `n` of "chunk n" in an error)."""
    choice_messages: int = 0
    text_bytes: int = 0
    """UTF-8 bytes of answer text (content and reasoning) so far."""
    torn: bool = False
    """The stream ended inside an event, which was dropped (core.sse)."""

    def end(
        self, t: float, request_id: str, outcome: RequestOutcome, error: str | None
    ) -> RequestEnded:
        """The request's end event with what the stream told."""
        return RequestEnded(
            t=t,
            request_id=request_id,
            outcome=outcome,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            finish_reason=self.finish_reason,
            spec_decoding=self.spec_decoding,
            error=error,
            server_timing=self.server_timing,
        )

    def end_of_stream(self, now: float, request_id: str) -> RequestEnded:
        """The end of a stream that closed normally, at its last arrival: ok once a finish
        reason came, else failed (the server stopped before the response finished)."""
        t = self.last_t if self.last_t is not None else now
        if self.finish_reason is None:
            why = (
                TORN_LAST_EVENT
                if self.torn
                else "the stream ended before the response finished (no finish_reason)"
            )
            return self.end(t, request_id, "failed", why)
        return self.end(t, request_id, "ok", None)


def token_count(value: Any) -> int | None:
    """A token count from the server: an int >= 0 (a whole float is accepted), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if value >= 0 else None


def _server_error(data: dict[str, Any]) -> str | None:
    """The message of an error the server reported inside the stream (vLLM: `{"error": {...}}`
    or `{"object": "error", "message": ...}`), else None."""
    err = data.get("error")
    if isinstance(err, dict):
        message = err.get("message")
        return str(message) if message is not None else json.dumps(err)[:500]
    if isinstance(err, str):
        return err
    if data.get("object") == "error":
        return str(data.get("message", ""))
    return None


def fold_message(t: float, rid: str, payload: bytes, state: StreamState, emit: Emit) -> None:
    """One data message: checked, folded into `state`, its choice emitted as a StreamChunk.

    Raises ChunkError for a chunk of the wrong shape, AnswerTooLarge past a limit, and
    StreamFormatError for an error the server reported in the stream.
    """
    state.messages += 1
    n = state.messages
    try:
        data = _loads(payload.decode("utf-8"))  # str: json skips its encoding detection
    except UnicodeDecodeError:
        raise ChunkError(f"chunk {n} is not UTF-8 text") from None
    except ValueError as exc:
        raise ChunkError(f"chunk {n} is not JSON ({exc})") from None
    if type(data) is not dict:
        raise ChunkError(f"chunk {n} is {_kind(data)}, expected a JSON object")
    state.last_t = t
    usage = data.get("usage")
    completion = prompt = None
    if usage is not None:
        if type(usage) is not dict:
            raise ChunkError.field(n, "usage", usage, "an object")
        completion = usage.get("completion_tokens")
        if type(completion) is not int or completion < 0:  # the common case inline
            completion = token_count(completion)
        prompt = usage.get("prompt_tokens")
        if type(prompt) is not int or prompt < 0:
            prompt = token_count(prompt)
        if completion is not None:
            state.completion_tokens = completion
            if completion > state.token_limit:
                raise AnswerTooLarge(f"answer over {state.token_limit} tokens")
        if prompt is not None:
            state.prompt_tokens = prompt
    metrics = data.get("metrics")
    if metrics is not None and type(metrics) is dict:
        spec = metrics.get("speculative_decoding")
        if isinstance(spec, dict):
            state.spec_decoding = spec
        timing = {k: v for k in TIMING_FIELDS if type(v := metrics.get(k)) in (int, float)}
        if timing:
            state.server_timing = timing
    choices = data.get("choices")
    if not choices:
        if choices is None or type(choices) is list:
            reported = _server_error(data)
            if reported is not None:
                raise StreamFormatError(
                    "the server reported an error in the stream: " + " ".join(reported.split())
                )
            return  # the final usage chunk: its numbers go into RequestEnded
        raise ChunkError.field(n, "choices", choices, "a list")
    if type(choices) is not list:
        raise ChunkError.field(n, "choices", choices, "a list")
    choice = choices[0]
    if type(choice) is not dict:
        raise ChunkError.field(n, "choices[0]", choice, "an object")
    state.choice_messages += 1
    if state.choice_messages > state.token_limit + CHUNK_SLACK:
        raise AnswerTooLarge(f"answer over {state.token_limit} tokens (counted in chunks)")
    delta = choice.get("delta")
    text = reasoning = ""
    role = None
    if delta is not None:
        if type(delta) is not dict:
            raise ChunkError.field(n, "choices[0].delta", delta, "an object")
        content = delta.get("content")
        if content is not None:
            if type(content) is not str:
                raise ChunkError.field(n, "choices[0].delta.content", content, "a string")
            text = content
        r = delta.get("role")
        role = r if type(r) is str else None
        thought = delta.get("reasoning") or delta.get("reasoning_content")
        reasoning = thought if type(thought) is str else ""
    finish = choice.get("finish_reason")
    if finish is not None:
        if type(finish) is not str:
            raise ChunkError.field(n, "choices[0].finish_reason", finish, "a string")
        state.finish_reason = finish
    if text or reasoning:
        size = len(text) if text.isascii() else len(text.encode())
        if reasoning:
            size += len(reasoning) if reasoning.isascii() else len(reasoning.encode())
        state.text_bytes += size
        if state.text_bytes > state.limits.max_answer_bytes:
            raise AnswerTooLarge(f"answer over {size_text(state.limits.max_answer_bytes)} of text")
    # Positional, in field order: t, request_id, text, reasoning, role, completion_tokens,
    # prompt_tokens, finish_reason.
    emit(StreamChunk(t, rid, text, reasoning, role, completion, prompt, finish))


async def read_stream(
    chunks: AsyncIterator[bytes], rid: str, state: StreamState, emit: Emit, clock: Clock
) -> None:
    """Read a response body to its `data: [DONE]` (or its end), emitting each message."""
    decoder = SseDecoder(state.limits.max_line_bytes)
    feed = decoder.feed
    async for chunk in chunks:
        t = clock()  # arrival, before any other work
        for payload in feed(chunk):
            if payload[:6] == b"[DONE]":
                return
            fold_message(t, rid, payload, state, emit)
    state.torn = decoder.pending
