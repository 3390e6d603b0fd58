"""`specmon watch --json`: a SessionView as plain JSON data (schema: docs/watch-json.md).

The one converter from the typed views to the documented JSON. Keys of version 1 keep their
names and meanings; keys added since (a row's chosen acceptance and its source, a server's
`lifetime` group) are additions within the version, which readers that ignore unknown keys accept.
No NaN or infinity is ever written: the views hold None for anything not finite (and for a gauge
outside its range, core.gauge_ranges, with the reason in `gauge_note`).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from specmon.core.canary import canary_json
from specmon.core.diagnosis.state import DiagnosisView
from specmon.core.events import GpuReading
from specmon.core.fleet_views import FleetTargetInfo
from specmon.core.histogram_quantiles import SOURCE_WORDS
from specmon.core.numbers import finite
from specmon.core.verdict import request_verdict
from specmon.core.views import (
    Acceptance,
    CycleView,
    EngineLogView,
    GpuView,
    HistogramLatency,
    LifetimeNumbers,
    PercentileView,
    RequestRow,
    ServerView,
    SessionView,
    SpecLogView,
)

SCHEMA = "specmon-watch"
SCHEMA_VERSION = 1


def _list(xs: tuple[float, ...] | None) -> list[float] | None:
    return list(xs) if xs else None


def session_n_spec(view: SessionView) -> int | None:
    """The session's K: what the command or the server said (`info.n_spec`), else the one K that
    every server's /metrics shows (its per-position labels). vLLM tells an attached client no K
    of its own, so without this a watch of a real server reported null beside a known K."""
    if view.info.n_spec is not None:
        return view.info.n_spec
    seen = {s.n_spec for s in view.servers}
    if len(seen) == 1:
        (k,) = seen
        return k
    return None


def snapshot_of(view: SessionView) -> dict[str, Any]:
    """The JSON object of one view (docs/watch-json.md)."""
    info = view.info
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "t": view.t,
        "simulated": view.simulated,
        "session": {
            "server": info.server,
            "model": info.model,
            "draft_model": info.draft_model,
            "method": info.method,
            "n_spec": session_n_spec(view),
            "vllm_version": info.vllm_version,
            "gpu": info.gpu,
            "baseline_tok_s": view.baseline_tok_s,
            "baseline_from": view.baseline_from,
            "window_seconds": view.window_seconds,
        },
        "servers": {s.source: server_json(s) for s in view.servers},
        "canary": [canary_json(c) for c in view.canaries],
        "requests": {
            "rows": [row_json(r) for r in view.rows],
            "in_flight": [row_json(r) for r in view.in_flight],
            "summary": {
                "total": view.summary.total,
                "ok": view.summary.ok,
                "failed": view.summary.failed,
                "cancelled": view.summary.cancelled,
                "flagged": view.summary.flagged,
                "verdicts": {
                    "vanilla-speed": view.summary.vanilla_speed,
                    "transition": view.summary.transition,
                    "loop": view.summary.loop,
                    "garbled": view.summary.garbled,
                },
                "rows_kept": view.summary.rows_kept,
                "rows_dropped": view.summary.rows_dropped,
                "lost_in_flight": view.summary.lost_in_flight,
                "mean_decode_tok_s": view.summary.mean_decode_tok_s,
                "mean_e2e_tok_s": view.summary.mean_e2e_tok_s,
                "mean_ttft_s": view.summary.mean_ttft_s,
                "mean_client_acceptance_length": view.summary.mean_client_acceptance_length,
            },
            "percentiles": {
                "ttft_s": _pct(view.percentiles.ttft_s),
                "tpot_s": _pct(view.percentiles.tpot_s),
                "e2el_s": _pct(view.percentiles.e2el_s),
                "decode_tok_s": _pct(view.percentiles.decode_tok_s),
                "itl_s": _pct(view.percentiles.itl_s),
            },
            "percentiles_source": SOURCE_WORDS["streams"],
        },
        "gpu": gpu_json(view.gpu),
        "markers": [{"t": m.t, "kind": m.kind, "label": m.label} for m in view.markers],
        "cycle": cycle_json(view.cycle),
        "diagnosis": diagnosis_json(view.diagnosis),
    }


def _plain(value: Any) -> Any:
    """A view's value as JSON data: dataclasses as objects, tuples as lists, floats finite."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return finite(value)
    return value


def diagnosis_json(d: DiagnosisView | None) -> dict[str, Any] | None:
    """The diagnosis analyses (docs/diagnosis.md; added within version 1): `context`, `thermal`,
    `seconds_saved`, `quality`, each the fields of its view (docs/diagnosis.md)."""
    if d is None:
        return None
    out: dict[str, Any] = _plain(d)
    return out


def _pct(p: PercentileView) -> dict[str, float | None]:
    return {"p50": p.p50, "p95": p.p95, "p99": p.p99}


def _latency(lat: HistogramLatency | None) -> dict[str, Any] | None:
    """A server's TTFT and ITL percentiles from its own histograms over the window."""
    if lat is None:
        return None
    return {
        "source": SOURCE_WORDS["histograms"],
        "ttft_s": _pct(lat.ttft_s),
        "itl_s": _pct(lat.itl_s),
        "ttft_count": lat.ttft_count,
        "itl_count": lat.itl_count,
    }


def _al(a: Acceptance | None) -> float | None:
    return a.acceptance_length if a is not None else None


def _rate(a: Acceptance | None) -> float | None:
    return a.draft_acceptance_rate if a is not None else None


def _pos(a: Acceptance | None) -> list[float] | None:
    return _list(a.per_position_rates) if a is not None else None


def row_json(r: RequestRow) -> dict[str, Any]:
    v = r.vanilla
    verdict = request_verdict(r)
    return {
        "request_id": r.request_id,
        "source": r.source,
        "model": r.model,
        "outcome": r.outcome,
        "error": r.error,
        "t_send": r.t_send,
        "t_end": r.t_end,
        "temperature": r.temperature,
        "max_tokens": r.max_tokens,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "ttft_s": r.ttft_s,
        "server_ttft_s": r.ttft_split.server_ttft_s if r.ttft_split else None,
        "server_queue_s": r.ttft_split.queue_s if r.ttft_split else None,
        "ttft_outside_engine_s": r.ttft_split.outside_s if r.ttft_split else None,
        "e2el_s": r.e2el_s,
        "tpot_s": r.tpot_s,
        "decode_tok_s": r.decode_tok_s,
        "e2e_tok_s": r.e2e_tok_s,
        "itl_p50_s": r.itl_p50_s,
        "itl_p99_s": r.itl_p99_s,
        "chunks": r.chunks,
        "decode_chunks": r.decode_chunks,
        "merged_chunks": r.merged_chunks,
        "single_token_chunks": r.single_token_chunks,
        "client_acceptance_length": _al(r.acceptance_chunks),
        "client_draft_acceptance_rate": _rate(r.acceptance_chunks),
        "client_per_position_rates": _pos(r.acceptance_chunks),
        "server_acceptance_length": _al(r.acceptance_server),
        "server_draft_acceptance_rate": _rate(r.acceptance_server),
        "server_per_position_rates": _pos(r.acceptance_server),
        "server_per_step_accepted": list(r.spec_steps.accepted) if r.spec_steps else None,
        "server_spec_steps": r.spec_steps.total if r.spec_steps else None,
        "server_spec_note": r.spec_decoding_note,
        "metrics_acceptance_length": _al(r.acceptance_metrics),
        "metrics_draft_acceptance_rate": _rate(r.acceptance_metrics),
        "metrics_per_position_rates": _pos(r.acceptance_metrics),
        "acceptance_length": _al(r.acceptance),
        "acceptance_source": r.acceptance.source if r.acceptance else None,
        "draft_acceptance_rate": _rate(r.acceptance),
        "per_position_rates": _pos(r.acceptance),
        "overlapping_requests": r.overlapping_requests,
        "vanilla": (
            None
            if v is None
            else {
                "flagged": v.flagged,
                "judged": v.judged,
                "reasons": [{"code": c, "text": s} for c, s in v.reasons],
            }
        ),
        "verdict": {
            "kind": verdict.kind,
            "flagged": verdict.flagged,
            "settled": r.settled,
            "reasons": [{"code": c, "text": s} for c, s in verdict.reasons],
        },
        "partial": r.partial,
    }


def lifetime_json(x: LifetimeNumbers | None) -> dict[str, Any] | None:
    if x is None:
        return None
    return {
        "since_reset_t": x.since_reset_t,
        "generation_tokens": x.generation_tokens,
        "drafts": x.drafts,
        "draft_tokens": x.draft_tokens,
        "accepted_tokens": x.accepted_tokens,
        "acceptance_length": x.acceptance_length,
        "draft_acceptance_rate": x.draft_acceptance_rate,
        "per_position_rates": _list(x.per_position_rates),
        "note": x.note,
    }


def server_json(s: ServerView) -> dict[str, Any]:
    h = s.history
    w = s.window
    return {
        "model": s.model,
        "vllm_version": s.vllm_version,
        "latency": _latency(s.window.latency),
        "status": s.status,
        "status_detail": s.status_detail,
        "status_since": s.status_since,
        "last_scrape_t": s.last_scrape_t,
        "spec_configured": s.spec_configured,
        "n_spec": s.n_spec,
        "engines": list(s.engines),
        "window_seconds": w.window_seconds,
        "decode_tok_s": w.decode_tok_s,
        "acceptance_length": w.acceptance_length,
        "draft_acceptance_rate": w.draft_acceptance_rate,
        "per_position_rates": _list(w.per_position_rates),
        "lifetime": lifetime_json(s.lifetime),
        "v0_draft_acceptance_rate": s.v0_draft_acceptance_rate,
        "requests_running": s.requests_running,
        "requests_waiting": s.requests_waiting,
        "kv_cache_usage": s.kv_cache_usage_frac,
        "gauge_note": s.gauge_note,
        "totals": {
            "generation_tokens": s.totals.generation_tokens,
            "drafts": s.totals.drafts,
            "draft_tokens": s.totals.draft_tokens,
            "accepted_tokens": s.totals.accepted_tokens,
        },
        "counter_resets": s.counter_resets,
        "recent_resets": [
            {
                "t": r.t,
                "series": r.series,
                "labels": dict(r.labels),
                "before": r.before,
                "after": r.after,
            }
            for r in s.recent_resets
        ],
        "history": {
            "t": list(h.t),
            "decode_tok_s": list(h.decode_tok_s),
            "acceptance_length": list(h.acceptance_length),
            "requests_running": list(h.requests_running),
            "kv_cache_usage": list(h.kv_cache_usage_frac),
            "draft_acceptance_rate": list(h.draft_acceptance_rate),
            "acceptance_length_lifetime": list(h.acceptance_length_lifetime),
            "draft_acceptance_rate_lifetime": list(h.draft_acceptance_rate_lifetime),
        },
        "log": {
            "lines": s.log.lines,
            "tail": list(s.log.tail),
            "spec_decoding": _spec_log_json(s.log.spec_decoding),
            "engine": _engine_log_json(s.log.engine),
        },
        "origin": s.origin,
        "per_request_note": s.per_request_note,
        "fleet": _fleet_json(s.fleet),
    }


def _fleet_json(f: FleetTargetInfo | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {
        "prometheus": f.prometheus,
        "job": f.job,
        "instance": f.instance,
        "health": f.health,
        "last_error": f.last_error,
        "rate_window_seconds": f.rate_window_s,
        "last_read_t": f.last_read_t,
        "history_step_seconds": f.history_step_s,
        "gpus": [gpu_reading_json(g) for g in f.gpus],
    }


def _spec_log_json(log: SpecLogView | None) -> dict[str, Any] | None:
    if log is None:
        return None
    return {
        "t": log.t,
        "acceptance_length": log.acceptance_length,
        "draft_acceptance_rate": log.draft_acceptance_rate,
        "accepted_tokens": log.accepted_tokens,
        "drafted_tokens": log.drafted_tokens,
        "per_position_rates": _list(log.per_position_rates),
        "format": log.format,
    }


def _engine_log_json(log: EngineLogView | None) -> dict[str, Any] | None:
    if log is None:
        return None
    return {
        "t": log.t,
        "engine": log.engine,
        "prompt_tok_s": log.prompt_tok_s,
        "generation_tok_s": log.generation_tok_s,
        "running": log.running,
        "waiting": log.waiting,
        "kv_cache_usage": log.kv_cache_usage_frac,
        "prefix_cache_hit_rate": log.prefix_cache_hit_rate,
        "format": log.format,
    }


def gpu_reading_json(r: GpuReading) -> dict[str, Any]:
    return {
        "index": r.index,
        "name": r.name,
        "uuid": r.uuid,
        "host": r.host,
        "temperature_c": finite(r.temperature_c),
        "slowdown_temperature_c": finite(r.slowdown_temperature_c),
        "memory_used_bytes": r.memory_used_bytes,
        "memory_total_bytes": r.memory_total_bytes,
        "utilization_pct": finite(r.utilization_pct),
        "power_w": finite(r.power_w),
        "power_limit_w": finite(r.power_limit_w),
        "power_limit_requested_w": finite(r.power_limit_requested_w),
        "power_limit_default_w": finite(r.power_limit_default_w),
        "sm_clock_mhz": finite(r.sm_clock_mhz),
        "memory_clock_mhz": finite(r.memory_clock_mhz),
        "clock_event_reasons": (
            list(r.clock_event_reasons) if r.clock_event_reasons is not None else None
        ),
    }


def gpu_json(g: GpuView) -> dict[str, Any]:
    return {
        "source": g.source,
        "t": g.t,
        "error": g.error,
        "gpus": [gpu_reading_json(r) for r in g.gpus],
        "history": {
            str(h.index): {
                "t": list(h.t),
                "temperature_c": list(h.temperature_c),
                "power_w": list(h.power_w),
                "sm_clock_mhz": list(h.sm_clock_mhz),
                "memory_used_bytes": list(h.memory_used_bytes),
                "utilization_pct": list(h.utilization_pct),
            }
            for h in g.history
        },
    }


def cycle_json(c: CycleView | None) -> dict[str, Any] | None:
    if c is None:
        return None
    out: dict[str, Any] = {
        "requests": c.requests,
        "long_run_mean_tok_s": c.long_run_mean_tok_s,
        "detected": c.detected,
    }
    if c.detected:
        out.update(
            period=c.period,
            cycles=c.cycles,
            transitions_per_cycle=c.transitions_per_cycle,
            degraded_per_cycle=c.degraded_per_cycle,
            recoveries_per_cycle=c.recoveries_per_cycle,
            fast_per_cycle=c.fast_per_cycle,
            fast_mean_tok_s=c.fast_mean_tok_s,
            degraded_mean_tok_s=c.degraded_mean_tok_s,
            share_degraded=c.share_degraded,
            long_run_over_peak=c.long_run_over_peak,
            period_min=c.period_min,
            period_max=c.period_max,
            period_mean=c.period_mean,
            episodes=c.episodes,
            stray_episodes=c.stray_episodes,
        )
    return out
