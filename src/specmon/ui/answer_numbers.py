"""The numbers shown under one answer (`AnswerNumbers`), from the answer's own stream
(`numbers_from`) or from the session's typed view of its request (`numbers_from_row`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from specmon.core.request_rows import chunks_acceptance, server_acceptance
from specmon.core.stream_stats import RequestStats
from specmon.core.verdict import VerdictKind, request_verdict
from specmon.core.views import Acceptance, GpuView, RequestRow, choose_acceptance


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
    flag: VerdictKind = "unjudged"
    """The request's verdict (core.verdict); "unjudged" until the session's row has one."""
    reasons: tuple[str, ...] = ()
    """Why the request was flagged (vanilla speed, transition) or failed, in words."""
    request_id: str | None = None


def _numbers(
    tokens: int | None,
    decode_tok_s: float | None,
    ttft_s: float | None,
    a: Acceptance | None,
) -> AnswerNumbers:
    return AnswerNumbers(
        tokens=tokens,
        decode_tok_s=decode_tok_s,
        ttft_s=ttft_s,
        acceptance_length=a.acceptance_length if a else None,
        acceptance_rate=a.draft_acceptance_rate if a else None,
        al_source=a.source if a else None,
    )


def numbers_from(stats: RequestStats, n_spec: int | None) -> AnswerNumbers:
    """The answer's numbers from the feed's own trace (before the session's view has the row),
    the acceptance chosen by core's rule (`core.views.choose_acceptance`: the server's
    per-request metrics first, the client's chunk sizes second), as the row will have it."""
    a = choose_acceptance(
        server_acceptance(stats.server_spec), chunks_acceptance(stats, n_spec), None
    )
    return _numbers(stats.completion_tokens, stats.decode_tok_s, stats.ttft_s, a)


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
    verdict = request_verdict(row)
    reasons = verdict.sentences
    if verdict.kind in ("failed", "cancelled"):
        reasons = (f"{verdict.kind}: {verdict.error or ''}",)
    return replace(
        _numbers(row.completion_tokens, row.decode_tok_s, row.ttft_s, a),
        gpu_temp_c=temp,
        sm_clock_mhz=clock,
        flag=verdict.kind,
        reasons=reasons,
        request_id=row.request_id,
    )
