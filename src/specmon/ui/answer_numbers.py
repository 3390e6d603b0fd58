"""The numbers shown under one answer (`AnswerNumbers`), from the answer's own stream
(`numbers_from`) or from the session's typed view of its request (`numbers_from_row`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specmon.core.stream_stats import RequestStats
from specmon.core.views import GpuView, RequestRow

FlagKind = Literal["ok", "transition", "vanilla", "failed", "unjudged"]


@dataclass(frozen=True, slots=True)
class AnswerNumbers:
    """The numbers shown under one answer (None = not measured; shown as —)."""

    tokens: int | None
    decode_tok_s: float | None
    ttft_s: float | None
    acceptance_length: float | None
    acceptance_rate: float | None
    al_source: str | None
    """"server" (vLLM's per-request metrics), "chunks" (tokens per stream chunk) or "metrics"
    (/metrics deltas around the request)."""
    gpu_temp_c: float | None = None
    """Highest GPU temperature sampled while the request ran."""
    sm_clock_mhz: float | None = None
    """Lowest SM clock sampled while the request ran."""
    flag: FlagKind = "unjudged"
    reasons: tuple[str, ...] = ()
    """Why the request was flagged (vanilla speed, transition) or failed, in words."""
    request_id: str | None = None


def numbers_from(stats: RequestStats) -> AnswerNumbers:
    """The answer's numbers from the feed's own trace (before the session's view has the row);
    the server's per-request speculative metrics first, the client's chunk sizes second."""
    spec = stats.server_spec
    al: float | None = None
    rate: float | None = None
    source: str | None = None
    if spec is not None and spec.mean_acceptance_length is not None:
        al, rate, source = spec.mean_acceptance_length, spec.draft_acceptance_rate, "server"
    elif stats.client_acceptance_length is not None:
        al, source = stats.client_acceptance_length, "chunks"
    return AnswerNumbers(
        tokens=stats.completion_tokens,
        decode_tok_s=stats.decode_tok_s,
        ttft_s=stats.ttft_s,
        acceptance_length=al,
        acceptance_rate=rate,
        al_source=source,
    )


def gpu_during(
    gpu: GpuView, t0: float | None, t1: float | None
) -> tuple[float | None, float | None]:
    """(highest temperature, lowest SM clock) over the GPU samples taken between t0 and t1
    (every GPU of the session); (None, None) when no sample fell in the interval."""
    if t0 is None:
        return None, None
    temps: list[float] = []
    clocks: list[float] = []
    for h in gpu.history:
        for t, temp, clock in zip(h.t, h.temperature_c, h.sm_clock_mhz, strict=False):
            if t0 <= t and (t1 is None or t <= t1):
                if temp is not None:
                    temps.append(temp)
                if clock is not None:
                    clocks.append(clock)
    return (max(temps) if temps else None, min(clocks) if clocks else None)


def numbers_from_row(row: RequestRow, gpu: GpuView) -> AnswerNumbers:
    """The answer's numbers from the session's typed view of its request."""
    a = row.acceptance
    temp, clock = gpu_during(gpu, row.t_send, row.t_end)
    flag: FlagKind = "unjudged"
    reasons: tuple[str, ...] = ()
    if row.outcome in ("failed", "cancelled"):
        flag = "failed"
        reasons = (f"{row.outcome}: {row.error or ''}",)
    elif row.speed_class is not None and row.speed_class.kind != "ok":
        flag = "vanilla" if row.speed_class.kind == "vanilla-speed" else "transition"
        reasons = tuple(text or code for code, text in row.speed_class.reasons)
    elif row.vanilla is not None and row.vanilla.flagged:
        flag = "vanilla"
        reasons = tuple(text or code for code, text in row.vanilla.reasons)
    elif row.vanilla is not None and row.vanilla.judged:
        flag = "ok"
    return AnswerNumbers(
        tokens=row.completion_tokens,
        decode_tok_s=row.decode_tok_s,
        ttft_s=row.ttft_s,
        acceptance_length=a.acceptance_length if a else None,
        acceptance_rate=a.draft_acceptance_rate if a else None,
        al_source=a.source if a else None,
        gpu_temp_c=temp,
        sm_clock_mhz=clock,
        flag=flag,
        reasons=reasons,
        request_id=row.request_id,
    )
