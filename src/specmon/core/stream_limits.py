"""The bounds every streamed answer is read under, and the words that tell the user about them.

A server may misbehave: one endless SSE line, a stream that never ends, a stream that stalls. The
stream clients (chat, demo, bench) read under these limits and end such a request as failed with
the reason, keeping what arrived before it. docs/app.md ("Streams that misbehave") lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.core.sse import MAX_LINE_BYTES, size_text

__all__ = [
    "BENCH_IDLE_TIMEOUT_S",
    "DEFAULT_LIMITS",
    "StreamLimits",
    "idle_message",
    "idle_note",
    "size_text",
]

DEFAULT_IDLE_TIMEOUT_S = 60.0
"""No byte from the server for this long ends the request (`--idle-timeout`)."""
BENCH_IDLE_TIMEOUT_S = 300.0
"""bench and sweep's `--idle-timeout`: they queue requests deeper than a chat does, and vLLM
sends nothing for a queued request before its first token."""
DEFAULT_MAX_ANSWER_BYTES = 4 << 20
"""The most answer text (content and reasoning, UTF-8) one answer may have: 4 MiB
(`--max-answer-bytes`)."""
DEFAULT_MAX_ANSWER_TOKENS = 65536
"""The most tokens of an answer whose request sets no max_tokens (`--max-answer-tokens`); a
request's own max_tokens bounds it otherwise."""
CHUNK_SLACK = 2
"""Chunks that may carry no token: the first (the role) and the last (the usage)."""
IDLE_NOTE_AFTER_S = 3.0
"""A stream quiet for this long is shown as waiting, with when it gives up."""


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """The limits one stream is read under."""

    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_line_bytes: int = MAX_LINE_BYTES
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    max_answer_tokens: int = DEFAULT_MAX_ANSWER_TOKENS

    def __post_init__(self) -> None:
        if not self.idle_timeout_s > 0 or self.idle_timeout_s == float("inf"):
            raise ValueError(
                f"the idle timeout must be a positive number of seconds, got {self.idle_timeout_s}"
            )
        for name in ("max_line_bytes", "max_answer_bytes", "max_answer_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def token_limit(self, max_tokens: int | None) -> int:
        """The most tokens an answer may have: the request's max_tokens, else the default."""
        return max_tokens if max_tokens is not None and max_tokens > 0 else self.max_answer_tokens


DEFAULT_LIMITS = StreamLimits()


def seconds(value: float) -> str:
    """A number of seconds as the messages write it (`60 s`, `0.5 s`)."""
    return f"{value:g} s"


def idle_message(timeout_s: float) -> str:
    """Why a request that stalled was given up."""
    return f"no data from the server for {seconds(timeout_s)}"


def idle_note(quiet_s: float, timeout_s: float) -> str | None:
    """What a streaming answer shows while the server sends nothing (None while it is not
    quiet for long: `IDLE_NOTE_AFTER_S`, or a tenth of a shorter timeout)."""
    if quiet_s < min(IDLE_NOTE_AFTER_S, timeout_s / 10):
        return None
    return f"no data for {int(quiet_s)} s — gives up at {seconds(timeout_s)}"
