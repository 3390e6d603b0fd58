"""The numbers shown under one answer (`AnswerNumbers`), read from the session's typed view of
its request (`view_numbers`: the finished row, else the in-flight row; `numbers_from_row`). The
view is the one place an answer's numbers are computed (core.session_state folds the request's
events); nothing here folds events again."""

from __future__ import annotations

from dataclasses import dataclass, replace

from specmon.core.verdict import VerdictKind, request_verdict
from specmon.core.views import Acceptance, GpuView, RequestRow, SessionView


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


def no_numbers(request_id: str) -> AnswerNumbers:
    """The numbers of an answer the view has no row for yet (all shown as —)."""
    return AnswerNumbers(None, None, None, None, None, None, request_id=request_id)


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


def find_row(
    view: SessionView | None, request_id: str, *, in_flight: bool = True
) -> RequestRow | None:
    """The view's row of a request: its finished row, else (with `in_flight`) its in-flight row
    (None: the view has neither; the newest row when a request id repeats)."""
    if view is None:
        return None
    for rows in (view.rows, view.in_flight) if in_flight else (view.rows,):
        for row in reversed(rows):
            if row.request_id == request_id:
                return row
    return None


def view_numbers(view: SessionView | None, request_id: str) -> AnswerNumbers | None:
    """An answer's numbers from the session's view of its request (finished row, else in-flight
    row: all acceptance sources, the verdict, the speed class, the GPU during it); None when the
    view has no row for it."""
    row = find_row(view, request_id)
    if row is None or view is None:
        return None
    return numbers_from_row(row, view.gpu)
