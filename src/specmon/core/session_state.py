"""The session state: a fold of every event into what the UI and `specmon watch --json` show.

`SessionState.apply(event)` folds one event; `snapshot()` returns a JSON-serialisable dict (schema
in docs/watch-json.md). Derived numbers (rates, AL, flags, cycle) are computed here from raw
observations, so a replayed recording gives the same numbers as the live run.

Memory is bounded whatever the session length: time series are rings (`history_points` entries), the
counter bank keeps a short time window, request rows are capped (`max_requests`; older requests are
summarised as counts and means over ALL requests), and markers, resets, log tails, ITL values and
the cycle detector's input are rings. MEMORY_CAP_BYTES is the stated cap, checked by a test that
folds a 10-hour session at 1 Hz.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from specmon.core import families
from specmon.core.counters import CounterBank, CounterPoint, sum_by_name, window_between
from specmon.core.detectors import vanilla
from specmon.core.detectors.cycle import detect_cycle
from specmon.core.events import (
    Event,
    GpuReading,
    GpuSampled,
    Marker,
    MetricSample,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    ServerLogLine,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.log_lines import EngineLog, SpecDecodingLog, parse_log_line
from specmon.core.percentiles import summary
from specmon.core.specdecode import (
    decode_tokens_per_second,
    gauge_max,
    gauge_sum,
    n_spec_of,
    spec_configured,
    spec_decode_stats,
)
from specmon.core.stream_stats import RequestStats, RequestTrace, request_stats

SCHEMA = "specmon-watch"
SCHEMA_VERSION = 1

DEFAULT_MAX_REQUESTS = 500
DEFAULT_HISTORY_SECONDS = 600.0
DEFAULT_WINDOW_SECONDS = 10.0
MAX_IN_FLIGHT = 256
MAX_MARKERS = 1000
MAX_RESETS_KEPT = 50
MAX_LOG_TAIL = 100
MAX_ITL_VALUES = 20_000
MAX_CYCLE_SPEEDS = 200
MAX_THROTTLE_READINGS = 8
PENDING_METRICS_SECONDS = 60.0
MEMORY_CAP_BYTES = 4 * 1024 * 1024
"""Stated cap on what a SessionState retains (tracemalloc bytes) with the default limits, after
a 10-hour session at 1 Hz (one server, one GPU, 3,600 requests of 161 tokens, hourly restarts;
tests/unit/test_session_state.py). Measured 2026-11-22: 1.53 MiB at 2 h, 1.56 MiB at 10 h."""


def _num(x: float | None) -> float | None:
    """A JSON-safe number: None for missing or non-finite."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def _gpu_dict(r: GpuReading) -> dict[str, Any]:
    return {
        "index": r.index,
        "name": r.name,
        "uuid": r.uuid,
        "host": r.host,
        "temperature_c": _num(r.temperature_c),
        "slowdown_temperature_c": _num(r.slowdown_temperature_c),
        "memory_used_bytes": r.memory_used_bytes,
        "memory_total_bytes": r.memory_total_bytes,
        "utilization_pct": _num(r.utilization_pct),
        "power_w": _num(r.power_w),
        "power_limit_w": _num(r.power_limit_w),
        "sm_clock_mhz": _num(r.sm_clock_mhz),
        "memory_clock_mhz": _num(r.memory_clock_mhz),
        "clock_event_reasons": (
            list(r.clock_event_reasons) if r.clock_event_reasons is not None else None
        ),
    }


_SPEC_TOTAL_NAMES = (
    families.GENERATION_TOKENS,
    families.SPEC_DRAFTS,
    families.SPEC_DRAFT_TOKENS,
    families.SPEC_ACCEPTED,
)


@dataclass(slots=True)
class _Server:
    bank: CounterBank
    history: deque[tuple[float, float | None, float | None, float | None, float | None]]
    status: str | None = None
    detail: str = ""
    status_t: float | None = None
    last_scrape_t: float | None = None
    gauges: tuple[MetricSample, ...] = ()
    spec_configured: bool | None = None
    n_spec: int | None = None
    engines: tuple[str, ...] = ()
    resets: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_RESETS_KEPT))
    reset_count: int = 0
    spec_log: SpecDecodingLog | None = None
    spec_log_t: float | None = None
    engine_log: EngineLog | None = None
    engine_log_t: float | None = None
    log_tail: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOG_TAIL))
    log_lines: int = 0


@dataclass(slots=True)
class _InFlight:
    trace: RequestTrace
    source: str
    model: str | None
    temperature: float | None
    overlap: int = 0
    running_max: float | None = None
    throttle: list[GpuReading] = field(default_factory=list)
    before: CounterPoint | None = None


@dataclass(slots=True)
class _Pending:
    """A finished request that ran alone, waiting for the scrape whose generation-token delta
    equals its completion tokens (then the /metrics AL of that request is exact)."""

    row: dict[str, Any]
    source: str
    before: CounterPoint
    tokens: int
    t_end: float


@dataclass(slots=True)
class _Totals:
    """Counts and sums over every finished request, including rows no longer kept."""

    requests: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    flagged: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            return
        self.sums[key] = self.sums.get(key, 0.0) + value
        self.counts[key] = self.counts.get(key, 0) + 1

    def mean(self, key: str) -> float | None:
        n = self.counts.get(key, 0)
        return self.sums[key] / n if n else None


class SessionState:
    """Fold of a session's events; `snapshot()` is what the UI and `watch --json` read."""

    def __init__(
        self,
        info: SessionInfo,
        *,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        history_seconds: float = DEFAULT_HISTORY_SECONDS,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        baseline_tok_s: float | None = None,
        vanilla_margin: float = vanilla.DEFAULT_MARGIN,
    ) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be at least 1 (got {max_requests})")
        self.info = info
        self.baseline_tok_s = baseline_tok_s
        self.vanilla_margin = vanilla_margin
        self.window_seconds = window_seconds
        self.history_points = max(int(history_seconds), 2)
        self.max_requests = max_requests
        self._servers: dict[str, _Server] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._rows: deque[dict[str, Any]] = deque(maxlen=max_requests)
        self._pending: list[_Pending] = []
        self._totals = _Totals()
        self._lost_in_flight = 0
        self._itl: deque[float] = deque(maxlen=MAX_ITL_VALUES)
        self._speeds: deque[float] = deque(maxlen=MAX_CYCLE_SPEEDS)
        self._cycle_cache: dict[str, Any] | None = None
        self._cycle_dirty = False
        self._markers: deque[dict[str, Any]] = deque(maxlen=MAX_MARKERS)
        self._gpu_last: GpuSampled | None = None
        self._gpu_history: dict[int, deque[tuple[Any, ...]]] = {}
        self._t: float | None = None
        self.events = 0

    # ------------------------------------------------------------------ folding

    def apply(self, event: Event) -> None:
        """Fold one event (any type). Unknown objects are ignored."""
        self.events += 1
        t = getattr(event, "t", None)
        if isinstance(t, int | float) and (self._t is None or t > self._t):
            self._t = float(t)
        if isinstance(event, MetricsScraped):
            self._scraped(event)
        elif isinstance(event, StreamChunk):
            self._trace(event.request_id, None).trace.add(event)
        elif isinstance(event, RequestStarted):
            self._started(event)
        elif isinstance(event, RequestEnded):
            self._ended(event)
        elif isinstance(event, GpuSampled):
            self._gpu(event)
        elif isinstance(event, ServerStatusChanged):
            self._status(event)
        elif isinstance(event, ServerLogLine):
            self._log(event)
        elif isinstance(event, Marker):
            self._markers.append({"t": event.t, "kind": "user", "label": event.label})

    def _server(self, source: str) -> _Server:
        server = self._servers.get(source)
        if server is None:
            keep = max(self.window_seconds * 2 + 5, PENDING_METRICS_SECONDS + 5)
            server = _Server(
                bank=CounterBank(keep_seconds=keep, max_points=4096),
                history=deque(maxlen=self.history_points),
            )
            self._servers[source] = server
        return server

    def _scraped(self, e: MetricsScraped) -> None:
        s = self._server(e.source)
        counters = [x for x in e.samples if x.name in families.COUNTERS]
        resets = s.bank.observe(e.t, counters)
        for r in resets:
            s.reset_count += 1
            item = {
                "t": r.t,
                "series": r.name,
                "labels": dict(r.labels),
                "before": r.before,
                "after": r.after,
            }
            s.resets.append(item)
        if resets:
            self._markers.append(
                {"t": e.t, "kind": "counter_reset", "label": f"counters reset on {e.source}"}
            )
        s.gauges = tuple(x for x in e.samples if x.name in families.GAUGES)
        s.last_scrape_t = e.t
        # No vllm: family at all (--disable-log-stats): whether speculation runs is unknown.
        s.spec_configured = spec_configured(e.samples) if e.samples else None
        s.n_spec = n_spec_of(e.samples)
        s.engines = tuple(sorted({v for x in e.samples for k, v in x.labels if k == "engine"}))
        if s.status != "up":
            s.status, s.detail, s.status_t = "up", "", e.t
        window = s.bank.window(self.window_seconds)
        stats = spec_decode_stats(window.deltas) if window else None
        running = gauge_sum(s.gauges, families.REQUESTS_RUNNING)
        s.history.append(
            (
                e.t,
                decode_tokens_per_second(window),
                stats.acceptance_length if stats else None,
                running,
                gauge_max(s.gauges, families.KV_CACHE_USAGE),
            )
        )
        for f in self._in_flight.values():
            if f.source == e.source and running is not None:
                f.running_max = running if f.running_max is None else max(f.running_max, running)
        self._match_pending(e.source, e.t)

    def _match_pending(self, source: str, t: float) -> None:
        if not self._pending:
            return
        s = self._servers.get(source)
        last = s.bank.latest() if s else None
        keep: list[_Pending] = []
        for p in self._pending:
            if p.source != source or last is None:
                keep.append(p)
                continue
            deltas = window_between(p.before, last).deltas
            gen = sum_by_name(deltas, families.GENERATION_TOKENS)
            if gen is not None and round(gen) == p.tokens:
                st = spec_decode_stats(deltas)
                p.row["metrics_acceptance_length"] = _num(st.acceptance_length)
                p.row["metrics_draft_acceptance_rate"] = _num(st.draft_acceptance_rate)
                p.row["metrics_per_position_rates"] = (
                    list(st.per_position_rates) if st.per_position_rates else None
                )
            elif (gen is None or gen < p.tokens) and t - p.t_end <= PENDING_METRICS_SECONDS:
                keep.append(p)
        self._pending = keep

    def _trace(self, request_id: str, started: RequestStarted | None) -> _InFlight:
        f = self._in_flight.get(request_id)
        if f is None:
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                oldest = next(iter(self._in_flight))
                del self._in_flight[oldest]
                self._lost_in_flight += 1
            source = started.source if started else ""
            f = _InFlight(
                trace=RequestTrace(request_id),
                source=source,
                model=started.model if started else None,
                temperature=started.temperature if started else None,
            )
            self._in_flight[request_id] = f
        return f

    def _started(self, e: RequestStarted) -> None:
        f = self._trace(e.request_id, e)
        f.source, f.model, f.temperature = e.source, e.model, e.temperature
        f.trace.add(e)
        server = self._servers.get(e.source)
        f.before = server.bank.latest() if server else None
        others = len(self._in_flight) - 1
        if others > 0:
            for g in self._in_flight.values():
                g.overlap = max(g.overlap, others)

    def _gpu(self, e: GpuSampled) -> None:
        self._gpu_last = e
        for r in e.gpus:
            ring = self._gpu_history.get(r.index)
            if ring is None:
                ring = self._gpu_history[r.index] = deque(maxlen=self.history_points)
            ring.append(
                (
                    e.t,
                    r.temperature_c,
                    r.power_w,
                    r.sm_clock_mhz,
                    r.memory_used_bytes,
                    r.utilization_pct,
                )
            )
            if self._in_flight and vanilla.throttle_evidence((r,)) is not None:
                for f in self._in_flight.values():
                    if len(f.throttle) < MAX_THROTTLE_READINGS:
                        f.throttle.append(r)

    def _status(self, e: ServerStatusChanged) -> None:
        s = self._server(e.source)
        if s.status != e.status:
            self._markers.append({"t": e.t, "kind": "status", "label": f"{e.source}: {e.status}"})
        s.status, s.detail, s.status_t = e.status, e.detail, e.t

    def _log(self, e: ServerLogLine) -> None:
        s = self._server(e.source)
        s.log_lines += 1
        s.log_tail.append(e.line[:2000])
        parsed = parse_log_line(e.line, vllm_version=self.info.vllm_version)
        if isinstance(parsed, SpecDecodingLog):
            s.spec_log, s.spec_log_t = parsed, e.t
        elif isinstance(parsed, EngineLog):
            s.engine_log, s.engine_log_t = parsed, e.t

    # ------------------------------------------------------------------ requests

    def _context(self, source: str) -> tuple[bool | None, int | None]:
        s = self._servers.get(source)
        configured = s.spec_configured if s else None
        n_spec = self.info.n_spec if self.info.n_spec is not None else (s.n_spec if s else None)
        if configured is None and self.info.n_spec is not None:
            configured = self.info.n_spec > 0
        return configured, n_spec

    def _ended(self, e: RequestEnded) -> None:
        f = self._trace(e.request_id, None)
        f.trace.add(e)
        del self._in_flight[e.request_id]
        configured, n_spec = self._context(f.source)
        stats = request_stats(f.trace, n_spec=n_spec)
        ctx = vanilla.VanillaContext(
            baseline_tok_s=self.baseline_tok_s,
            spec_configured=configured,
            n_spec=n_spec,
            gpu_readings=tuple(f.throttle),
            overlapping_requests=f.overlap,
            server_running_max=f.running_max,
            margin=self.vanilla_margin,
        )
        verdict = vanilla.judge(stats, ctx)
        row = _row(stats, verdict, f)
        self._rows.append(row)
        self._itl.extend(stats.itl_s)
        tot = self._totals
        tot.requests += 1
        tot.outcomes[stats.outcome] = tot.outcomes.get(stats.outcome, 0) + 1
        tot.flagged += verdict.flagged
        if stats.outcome == "ok":  # a failed or cancelled request's speed is not a measurement
            for key in ("decode_tok_s", "e2e_tok_s", "ttft_s", "client_acceptance_length"):
                tot.add(key, getattr(stats, key))
        if stats.outcome == "ok" and stats.decode_tok_s is not None:
            self._speeds.append(stats.decode_tok_s)
            self._cycle_dirty = True
        if (
            stats.outcome == "ok"
            and f.overlap == 0
            and f.before is not None
            and stats.completion_tokens
        ):
            self._pending.append(_Pending(row, f.source, f.before, stats.completion_tokens, e.t))
            self._pending = self._pending[-16:]

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> dict[str, Any]:
        """Everything shown, as plain JSON-serialisable data (docs/watch-json.md)."""
        rows = list(self._rows)
        done = [r for r in rows if r["outcome"] == "ok"]

        def pct(key: str) -> dict[str, float | None]:
            return summary(r[key] for r in done if r[key] is not None)

        tot = self._totals
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "t": self._t,
            "simulated": self.info.simulated,
            "session": {
                "server": self.info.server,
                "model": self.info.model,
                "draft_model": self.info.draft_model,
                "method": self.info.method,
                "n_spec": self.info.n_spec,
                "vllm_version": self.info.vllm_version,
                "gpu": self.info.gpu,
                "baseline_tok_s": _num(self.baseline_tok_s),
                "window_seconds": self.window_seconds,
            },
            "servers": {src: self._server_snapshot(s) for src, s in self._servers.items()},
            "requests": {
                "rows": rows,
                "in_flight": [
                    _row(request_stats(f.trace, n_spec=self._context(f.source)[1]), None, f)
                    for f in self._in_flight.values()
                ],
                "summary": {
                    "total": tot.requests,
                    "ok": tot.outcomes.get("ok", 0),
                    "failed": tot.outcomes.get("failed", 0),
                    "cancelled": tot.outcomes.get("cancelled", 0),
                    "flagged": tot.flagged,
                    "rows_kept": len(rows),
                    "rows_dropped": tot.requests - len(rows),
                    "lost_in_flight": self._lost_in_flight,
                    "mean_decode_tok_s": tot.mean("decode_tok_s"),
                    "mean_e2e_tok_s": tot.mean("e2e_tok_s"),
                    "mean_ttft_s": tot.mean("ttft_s"),
                    "mean_client_acceptance_length": tot.mean("client_acceptance_length"),
                },
                "percentiles": {
                    "ttft_s": pct("ttft_s"),
                    "tpot_s": pct("tpot_s"),
                    "e2el_s": pct("e2el_s"),
                    "decode_tok_s": pct("decode_tok_s"),
                    "itl_s": summary(self._itl),
                },
            },
            "gpu": self._gpu_snapshot(),
            "markers": list(self._markers),
            "cycle": self._cycle(),
        }

    def _server_snapshot(self, s: _Server) -> dict[str, Any]:
        window = s.bank.window(self.window_seconds)
        stats = spec_decode_stats(window.deltas) if window else None
        totals = s.bank.totals()
        hist = list(s.history)
        return {
            "status": s.status,
            "status_detail": s.detail,
            "status_since": s.status_t,
            "last_scrape_t": s.last_scrape_t,
            "spec_configured": s.spec_configured,
            "n_spec": s.n_spec,
            "engines": list(s.engines),
            "window_seconds": window.seconds if window else None,
            "decode_tok_s": _num(decode_tokens_per_second(window)),
            "acceptance_length": _num(stats.acceptance_length) if stats else None,
            "draft_acceptance_rate": _num(stats.draft_acceptance_rate) if stats else None,
            "per_position_rates": (
                list(stats.per_position_rates) if stats and stats.per_position_rates else None
            ),
            "v0_draft_acceptance_rate": _num(
                gauge_max(s.gauges, families.V0_DRAFT_ACCEPTANCE_RATE)
            ),
            "requests_running": _num(gauge_sum(s.gauges, families.REQUESTS_RUNNING)),
            "requests_waiting": _num(gauge_sum(s.gauges, families.REQUESTS_WAITING)),
            "kv_cache_usage": _num(gauge_max(s.gauges, families.KV_CACHE_USAGE)),
            "totals": {
                "generation_tokens": sum_by_name(totals, families.GENERATION_TOKENS),
                "drafts": sum_by_name(totals, families.SPEC_DRAFTS),
                "draft_tokens": sum_by_name(totals, families.SPEC_DRAFT_TOKENS),
                "accepted_tokens": sum_by_name(totals, families.SPEC_ACCEPTED),
            },
            "counter_resets": s.reset_count,
            "recent_resets": list(s.resets),
            "history": {
                "t": [h[0] for h in hist],
                "decode_tok_s": [_num(h[1]) for h in hist],
                "acceptance_length": [_num(h[2]) for h in hist],
                "requests_running": [_num(h[3]) for h in hist],
                "kv_cache_usage": [_num(h[4]) for h in hist],
            },
            "log": {
                "lines": s.log_lines,
                "tail": list(s.log_tail),
                "spec_decoding": _spec_log_dict(s.spec_log, s.spec_log_t),
                "engine": _engine_log_dict(s.engine_log, s.engine_log_t),
            },
        }

    def _gpu_snapshot(self) -> dict[str, Any]:
        last = self._gpu_last
        return {
            "source": last.source if last else None,
            "t": last.t if last else None,
            "error": last.error if last else None,
            "gpus": [_gpu_dict(r) for r in last.gpus] if last else [],
            "history": {
                str(index): {
                    "t": [x[0] for x in ring],
                    "temperature_c": [_num(x[1]) for x in ring],
                    "power_w": [_num(x[2]) for x in ring],
                    "sm_clock_mhz": [_num(x[3]) for x in ring],
                    "memory_used_bytes": [x[4] for x in ring],
                    "utilization_pct": [_num(x[5]) for x in ring],
                }
                for index, ring in self._gpu_history.items()
            },
        }

    def _cycle(self) -> dict[str, Any] | None:
        if self._cycle_dirty:
            self._cycle_dirty = False
            speeds = list(self._speeds)
            report = detect_cycle(speeds)
            base: dict[str, Any] = {
                "requests": len(speeds),
                "long_run_mean_tok_s": sum(speeds) / len(speeds) if speeds else None,
                "detected": report is not None,
            }
            if report is not None:
                base.update(
                    period=report.period,
                    cycles=report.cycles,
                    transitions_per_cycle=report.transitions_per_cycle,
                    degraded_per_cycle=report.degraded_per_cycle,
                    recoveries_per_cycle=report.recoveries_per_cycle,
                    fast_per_cycle=report.fast_per_cycle,
                    fast_mean_tok_s=report.fast_mean,
                    degraded_mean_tok_s=report.degraded_mean,
                    share_degraded=report.share_degraded,
                    long_run_over_peak=(
                        report.long_run_mean / report.fast_mean if report.fast_mean else None
                    ),
                )
            self._cycle_cache = base
        return self._cycle_cache

    # ------------------------------------------------------------------ sizes (for tests)

    def retained_counts(self) -> dict[str, int]:
        """How many objects each bounded container holds (the memory test checks these)."""
        return {
            "rows": len(self._rows),
            "in_flight": len(self._in_flight),
            "pending": len(self._pending),
            "markers": len(self._markers),
            "itl": len(self._itl),
            "speeds": len(self._speeds),
            "server_history": sum(len(s.history) for s in self._servers.values()),
            "counter_points": sum(s.bank.points for s in self._servers.values()),
            "gpu_history": sum(len(r) for r in self._gpu_history.values()),
            "resets": sum(len(s.resets) for s in self._servers.values()),
            "log_tail": sum(len(s.log_tail) for s in self._servers.values()),
        }


def _row(
    stats: RequestStats, verdict: vanilla.VanillaVerdict | None, f: _InFlight
) -> dict[str, Any]:
    server = stats.server_spec
    itl = summary(stats.itl_s)
    return {
        "request_id": stats.request_id,
        "source": f.source,
        "model": f.model,
        "outcome": stats.outcome,
        "error": stats.error,
        "t_send": stats.t_send,
        "t_end": stats.t_end,
        "temperature": f.temperature,
        "max_tokens": stats.max_tokens,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "ttft_s": _num(stats.ttft_s),
        "e2el_s": _num(stats.e2el_s),
        "tpot_s": _num(stats.tpot_s),
        "decode_tok_s": _num(stats.decode_tok_s),
        "e2e_tok_s": _num(stats.e2e_tok_s),
        "itl_p50_s": itl["p50"],
        "itl_p99_s": itl["p99"],
        "chunks": len(stats.itl_s) + (1 if stats.ttft_s is not None else 0),
        "decode_chunks": stats.decode_chunks,
        "merged_chunks": stats.merged_chunks,
        "single_token_chunks": stats.single_token_chunks,
        "client_acceptance_length": _num(stats.client_acceptance_length),
        "server_acceptance_length": _num(server.mean_acceptance_length) if server else None,
        "server_draft_acceptance_rate": _num(server.draft_acceptance_rate) if server else None,
        "metrics_acceptance_length": None,
        "metrics_draft_acceptance_rate": None,
        "metrics_per_position_rates": None,
        "overlapping_requests": f.overlap,
        "vanilla": (
            None
            if verdict is None
            else {
                "flagged": verdict.flagged,
                "judged": verdict.judged,
                "reasons": [{"code": c, "text": s} for c, s in verdict.reasons],
            }
        ),
    }


def _spec_log_dict(log: SpecDecodingLog | None, t: float | None) -> dict[str, Any] | None:
    if log is None:
        return None
    return {
        "t": t,
        "acceptance_length": _num(log.acceptance_length),
        "draft_acceptance_rate": _num(log.draft_acceptance_rate),
        "accepted_tokens": log.accepted_tokens,
        "drafted_tokens": log.drafted_tokens,
        "per_position_rates": list(log.per_position_rates) if log.per_position_rates else None,
        "format": log.format,
    }


def _engine_log_dict(log: EngineLog | None, t: float | None) -> dict[str, Any] | None:
    if log is None:
        return None
    return {
        "t": t,
        "engine": log.engine,
        "prompt_tok_s": _num(log.prompt_tok_s),
        "generation_tok_s": _num(log.generation_tok_s),
        "running": log.running,
        "waiting": log.waiting,
        "kv_cache_usage": _num(log.kv_cache_usage),
        "prefix_cache_hit_rate": _num(log.prefix_cache_hit_rate),
        "format": log.format,
    }
