"""Event builders for the diagnosis tests and the day-of-events benchmark: answers with a prompt
length, per-step token counts and text, and GPU samples with a chosen SM clock."""

from __future__ import annotations

from collections.abc import Sequence

from specmon.core.events import (
    Event,
    GpuReading,
    GpuSampled,
    RequestEnded,
    RequestStarted,
    StreamChunk,
)

SRC = "http://127.0.0.1:8000"


def answer(
    rid: str,
    t0: float,
    *,
    prompt_tokens: int,
    step_tokens: Sequence[int],
    step_s: float | Sequence[float],
    words: Sequence[str] = ("word",),
    ttft: float = 0.05,
) -> list[Event]:
    """Send, role chunk, the prefill token, one chunk per step (tokens from `step_tokens`, text
    taken round-robin from `words`), then the end with prompt and completion tokens."""
    events: list[Event] = [
        RequestStarted(t=t0, request_id=rid, source=SRC, model="tiny", max_tokens=4096)
    ]
    t = t0 + ttft
    events.append(StreamChunk(t=t, request_id=rid, role="assistant", completion_tokens=0))
    events.append(StreamChunk(t=t, request_id=rid, text="w0 ", completion_tokens=1))
    cum = 1
    w = 0
    for i, n in enumerate(step_tokens):
        t += step_s if isinstance(step_s, int | float) else step_s[i]
        cum += n
        text = ""
        for _ in range(n):
            text += words[w % len(words)] + " "
            w += 1
        events.append(StreamChunk(t=t, request_id=rid, text=text, completion_tokens=cum))
    events.append(
        RequestEnded(
            t=t + 0.001,
            request_id=rid,
            outcome="ok",
            prompt_tokens=prompt_tokens,
            completion_tokens=cum,
            finish_reason="length",
        )
    )
    return events


def gpu(t: float, clock_mhz: float, temp_c: float = 60.0) -> GpuSampled:
    return GpuSampled(
        t=t,
        source="gpu",
        gpus=(
            GpuReading(
                index=0,
                temperature_c=temp_c,
                slowdown_temperature_c=90.0,
                power_w=400.0,
                power_limit_w=600.0,
                power_limit_requested_w=700.0,
                power_limit_default_w=700.0,
                sm_clock_mhz=clock_mhz,
            ),
        ),
    )
