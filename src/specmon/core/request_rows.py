"""A request's row: its statistics, its acceptance from each source, and its vanilla verdict.

Acceptance sources (core.views.Acceptance), preferred in this order:
1. "server": the server's per-request `metrics.speculative_decoding` (validated by
   core.stream_stats; an invalid object is ignored with a note on the row);
2. "chunks": tokens per stream chunk (client side);
3. "metrics": /metrics counter deltas around a request that ran alone (filled in later, when the
   scrape whose generation-token delta equals its completion tokens arrives).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from specmon.core.counters import CounterPoint
from specmon.core.detectors import vanilla
from specmon.core.events import GpuReading
from specmon.core.numbers import finite
from specmon.core.percentiles import summary
from specmon.core.specdecode import SpecDecodeStats
from specmon.core.stream_stats import RequestStats, RequestTrace, ServerSpecStats
from specmon.core.views import (
    Acceptance,
    RequestOutcomeView,
    RequestRow,
    SpecSteps,
    VanillaView,
    choose_acceptance,
)

MAX_KEPT_STEPS = 2048
"""Per-step accepted counts kept per row (the first ones): 500 rows stay under ~1 MiB."""


def _rates(rates: tuple[float, ...] | None) -> tuple[float, ...] | None:
    if rates is None or not all(math.isfinite(r) for r in rates):
        return None
    return rates


@dataclass(slots=True)
class InFlight:
    """What the state knows of a request while it streams."""

    trace: RequestTrace
    source: str
    model: str | None
    temperature: float | None
    overlap: int = 0
    running_max: float | None = None
    throttle: list[GpuReading] = field(default_factory=list)
    before: CounterPoint | None = None


def server_acceptance(spec: ServerSpecStats | None) -> Acceptance | None:
    if spec is None:
        return None
    return Acceptance(
        source="server",
        acceptance_length=finite(spec.mean_acceptance_length),
        draft_acceptance_rate=finite(spec.draft_acceptance_rate),
        per_position_rates=_rates(spec.per_position_rates),
    )


def chunks_acceptance(stats: RequestStats, n_spec: int | None) -> Acceptance | None:
    """Client-side acceptance: AL = mean tokens per counted decode chunk (one chunk = one step,
    which emitted accepted + 1 tokens). When K is known: the draft acceptance rate (AL - 1)/K (K
    drafts proposed per step) and per-position rate i = share of counted chunks that carried at
    least i + 2 tokens (the step accepted at least i + 1 drafts)."""
    al = finite(stats.client_acceptance_length)
    if al is None:
        return None
    rate = (al - 1.0) / n_spec if n_spec else None
    counted = stats.counted_chunk_tokens
    per_pos: tuple[float, ...] | None = None
    if n_spec and counted:
        per_pos = tuple(sum(1 for d in counted if d >= i + 2) / len(counted) for i in range(n_spec))
    return Acceptance(
        source="chunks",
        acceptance_length=al,
        draft_acceptance_rate=rate,
        per_position_rates=per_pos,
    )


def metrics_acceptance(st: SpecDecodeStats) -> Acceptance:
    return Acceptance(
        source="metrics",
        acceptance_length=finite(st.acceptance_length),
        draft_acceptance_rate=finite(st.draft_acceptance_rate),
        per_position_rates=_rates(st.per_position_rates),
    )


def _spec_steps(spec: ServerSpecStats | None) -> SpecSteps | None:
    if spec is None or spec.per_step_accepted is None:
        return None
    acc = spec.per_step_accepted
    drafted = spec.per_step_drafted
    # validated: every entry is 0..255 (MAX_SPEC_TOKENS), so bytes hold them exactly
    return SpecSteps(
        accepted=bytes(acc[:MAX_KEPT_STEPS]),
        drafted=bytes(drafted[:MAX_KEPT_STEPS]) if drafted is not None else None,
        total=len(acc),
    )


def verdict_view(verdict: vanilla.VanillaVerdict | None) -> VanillaView | None:
    if verdict is None:
        return None
    return VanillaView(flagged=verdict.flagged, judged=verdict.judged, reasons=verdict.reasons)


def _outcome(value: str) -> RequestOutcomeView:
    if value == "ok":
        return "ok"
    if value == "failed":
        return "failed"
    if value == "cancelled":
        return "cancelled"
    return "running"


def build_row(
    stats: RequestStats,
    verdict: vanilla.VanillaVerdict | None,
    f: InFlight,
    n_spec: int | None,
) -> RequestRow:
    """The row of one request (the metrics source is added later by `with_metrics`)."""
    itl = summary(stats.itl_s)
    server = server_acceptance(stats.server_spec)
    chunks = chunks_acceptance(stats, n_spec)
    return RequestRow(
        request_id=stats.request_id,
        source=f.source,
        model=f.model,
        outcome=_outcome(stats.outcome),
        error=stats.error,
        t_send=stats.t_send,
        t_end=stats.t_end,
        temperature=f.temperature,
        max_tokens=stats.max_tokens,
        prompt_tokens=stats.prompt_tokens,
        completion_tokens=stats.completion_tokens,
        ttft_s=finite(stats.ttft_s),
        e2el_s=finite(stats.e2el_s),
        tpot_s=finite(stats.tpot_s),
        decode_tok_s=finite(stats.decode_tok_s),
        e2e_tok_s=finite(stats.e2e_tok_s),
        itl_p50_s=itl["p50"],
        itl_p99_s=itl["p99"],
        chunks=len(stats.itl_s) + (1 if stats.ttft_s is not None else 0),
        decode_chunks=stats.decode_chunks,
        merged_chunks=stats.merged_chunks,
        single_token_chunks=stats.single_token_chunks,
        acceptance=choose_acceptance(server, chunks, None),
        acceptance_server=server,
        acceptance_chunks=chunks,
        acceptance_metrics=None,
        spec_steps=_spec_steps(stats.server_spec),
        spec_decoding_note=stats.server_spec_note,
        overlapping_requests=f.overlap,
        vanilla=verdict_view(verdict),
        ttft_split=stats.ttft_split,
        partial=stats.partial,
    )


def with_metrics(row: RequestRow, st: SpecDecodeStats) -> RequestRow:
    """The row with its /metrics acceptance (and the chosen acceptance updated)."""
    metrics = metrics_acceptance(st)
    chosen = choose_acceptance(row.acceptance_server, row.acceptance_chunks, metrics)
    return dataclasses.replace(row, acceptance_metrics=metrics, acceptance=chosen)
