"""The session state: a fold of every event into what the UI and `specmon watch --json` show.

`SessionState.apply(event)` folds one event (one handler per event type, core.dispatch);
`view()` builds the typed, immutable `SessionView` (core.views) and `snapshot()` is that view as
JSON (core.watch_json, schema in docs/watch-json.md). Derived numbers (rates, AL, flags, cycle)
are computed here from raw observations, so a replayed recording gives the same numbers as the
live run.

Publishing (core.publish): `apply` only marks the state dirty; `publish_if_due(now)`, called by
the runtime on the hub thread at most at a frame rate, rebuilds the view and swaps one reference;
`published_view` is read from any thread without a lock.

Memory is bounded whatever the session length: time series are rings (`history_points` entries), the
counter bank keeps a short time window, request rows are capped (`max_requests`; older requests are
summarised as counts and means over ALL requests), and markers, resets, log tails, ITL values and
the cycle detector's input are rings; the diagnosis fold (core.diagnosis: AL by context, thermal
attribution, seconds saved, quality sentinel) holds bins, running sums and capped rings.
MEMORY_CAP_BYTES is the stated cap, checked by a test that fills every ring and folds more
(tests/unit/test_session_state.py); benchmarks/session_soak.py folds 10 hours at 1 Hz.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from specmon.core import families
from specmon.core.canary import CanaryTracker
from specmon.core.counters import CounterBank, CounterPoint, sum_by_name, window_between
from specmon.core.detectors import vanilla
from specmon.core.detectors.cycle import detect_cycle
from specmon.core.detectors.speed_class import (
    DEFAULT_WINDOW,
    NEIGHBOURS_AFTER,
    SpeedLevels,
    among_neighbours,
    at_change_of_level,
    speed_class,
    speed_levels,
    waiting,
)
from specmon.core.diagnosis.quality import QualityVerdict
from specmon.core.diagnosis.state import Diagnosis, FinishedAnswer
from specmon.core.diagnosis.thermal import PowerLimitView, gpu_during
from specmon.core.dispatch import event_table
from specmon.core.events import (
    CanaryProbed,
    Event,
    FleetSampled,
    GpuSampled,
    Marker,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    ServerLogLine,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.fleet_state import FleetState
from specmon.core.log_lines import parse_log_line
from specmon.core.numbers import finite
from specmon.core.percentiles import summary
from specmon.core.publish import ViewPublisher
from specmon.core.request_rows import InFlight, build_row, with_metrics
from specmon.core.server_identities import server_identity
from specmon.core.server_state import ServerState
from specmon.core.specdecode import spec_decode_stats
from specmon.core.stream_stats import RequestTrace, request_stats
from specmon.core.verdict import FLAGGED, VerdictKind, request_verdict
from specmon.core.views import (
    CycleView,
    GpuHistory,
    GpuView,
    MarkerKind,
    MarkerView,
    PercentilesView,
    PercentileView,
    RequestRow,
    ServerView,
    SessionView,
    SpeedClassView,
    SummaryView,
)
from specmon.core.watch_json import SCHEMA, SCHEMA_VERSION, snapshot_of

__all__ = ["MEMORY_CAP_BYTES", "SCHEMA", "SCHEMA_VERSION", "SessionState"]

DEFAULT_MAX_REQUESTS = 500
DEFAULT_HISTORY_SECONDS = 600.0
DEFAULT_WINDOW_SECONDS = 10.0
MAX_IN_FLIGHT = 256
MAX_MARKERS = 1000
MAX_ITL_VALUES = 20_000
MAX_CYCLE_SPEEDS = 200
MAX_VERDICT_CHANGES = 1024
"""Verdict changes kept for a reader that follows the fold (the replay's timeline reads them
after every event; one event changes at most DEFAULT_WINDOW + 1 verdicts)."""
MAX_THROTTLE_READINGS = 8
MAX_PENDING = 16
PENDING_METRICS_SECONDS = 60.0
MEMORY_CAP_BYTES = 4 * 1024 * 1024
"""Stated cap on what a SessionState retains (tracemalloc bytes) with the default limits, after
a 10-hour session at 1 Hz (one server, one GPU, 3,600 requests of 161 tokens, hourly restarts;
tests/unit/test_session_state.py). Measured 2026-11-22: 1.53 MiB at 2 h, 1.56 MiB at 10 h."""

GpuPoint = tuple[float, float | None, float | None, float | None, int | None, float | None]
"""(t, temperature °C, power W, SM clock MHz, memory used bytes, utilisation %)."""


@dataclass(slots=True)
class _Pending:
    """A finished request that ran alone, waiting for the scrape whose generation-token delta
    equals its completion tokens (then the /metrics AL of that request is exact)."""

    request_id: str
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
    verdicts: dict[VerdictKind, int] = field(default_factory=dict)
    """Finished requests by their verdict now (core.verdict)."""
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

    def count(self, kind: VerdictKind, step: int) -> None:
        self.verdicts[kind] = self.verdicts.get(kind, 0) + step
        if kind in FLAGGED:
            self.flagged += step


@dataclass(frozen=True, slots=True)
class VerdictChange:
    """A finished request's verdict, when it is first given or changes (an unsettled row
    classed once the speed levels appear)."""

    request_id: str
    t: float | None
    """The request's end."""
    kind: VerdictKind

    @property
    def flagged(self) -> bool:
        return self.kind in FLAGGED


def _row_al(row: RequestRow) -> float | None:
    """The row's chosen acceptance length (None when unknown or not finite)."""
    acc = row.acceptance
    al = acc.acceptance_length if acc is not None else None
    return al if al is not None and math.isfinite(al) else None


def _pct(values: Any) -> PercentileView:
    s = summary(values)
    return PercentileView(p50=s["p50"], p95=s["p95"], p99=s["p99"])


class SessionState:
    """Fold of a session's events; `view()` is what the UI reads, `snapshot()` its JSON."""

    def __init__(
        self,
        info: SessionInfo,
        *,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        history_seconds: float = DEFAULT_HISTORY_SECONDS,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        baseline_tok_s: float | None = None,
        baseline_from: str | None = None,
        vanilla_margin: float = vanilla.DEFAULT_MARGIN,
        publish_interval_s: float = 0.05,
    ) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be at least 1 (got {max_requests})")
        self.info = info
        self.baseline_tok_s = baseline_tok_s
        self.baseline_from = baseline_from if baseline_tok_s is not None else None
        self.vanilla_margin = vanilla_margin
        self.window_seconds = window_seconds
        self.history_points = max(int(history_seconds), 2)
        self.max_requests = max_requests
        self._servers: dict[str, ServerState] = {}
        self._fleet = FleetState(self.history_points)
        self._in_flight: dict[str, InFlight] = {}
        self._rows: deque[RequestRow] = deque(maxlen=max_requests)
        self._pending: list[_Pending] = []
        self._totals = _Totals()
        self._lost_in_flight = 0
        self._diagnosis = Diagnosis()
        self._itl: deque[float] = deque(maxlen=MAX_ITL_VALUES)
        self._speeds: deque[float | None] = deque(maxlen=MAX_CYCLE_SPEEDS)
        self._als: deque[float | None] = deque(maxlen=MAX_CYCLE_SPEEDS)
        """The AL of each entry of `_speeds` (None: unknown or quality-flagged)."""
        """Decode speeds of ok requests in order; None for an answer the quality sentinel
        flagged (it keeps its place: the cycle's period counts requests)."""
        self._known_speeds = 0
        self._had_levels = False
        """Whether speed levels existed at the previous measured answer's end."""
        """How many speeds (not None) were ever added."""
        self._unsettled: deque[tuple[str, int, float]] = deque()
        """(request id, _known_speeds when it ended, its clock scale) of ok rows waiting for
        speed levels."""
        self._between: list[tuple[str, int, SpeedLevels, SpeedClassView]] = []
        """(request id, _known_speeds when it ended, the levels that classed it, its transition
        view) of rows classed transition, waiting for an answer after them at a level and for
        NEIGHBOURS_AFTER later speeds to be judged among their neighbours (speed_class, step
        6)."""
        self._ref_clock: float | None = None
        """The SM clock (MHz, first GPU) while the first answer with GPU samples ran: the speeds
        of the levels and the cycle are taken at it (speed_class, step 5)."""
        self._changes: deque[VerdictChange] = deque(maxlen=MAX_VERDICT_CHANGES)
        self._changes_made = 0
        self._cycle_cache: CycleView | None = None
        self._rows_cache: tuple[RequestRow, ...] | None = None
        """The kept rows with their speed class (rebuilt when a row is added or replaced)."""
        self._cycle_dirty = False
        self._pct_cache: PercentilesView | None = None
        self._markers: deque[MarkerView] = deque(maxlen=MAX_MARKERS)
        self._markers_added = 0
        self._gpu_last: GpuSampled | None = None
        self._gpu_history: dict[int, deque[GpuPoint]] = {}
        self._gpu_view_cache: GpuView | None = None
        self._t: float | None = None
        self.events = 0
        self._canary = CanaryTracker()
        self._handlers: dict[type, Callable[[Any], None]] = event_table(
            {
                MetricsScraped: self._scraped,
                StreamChunk: self._chunk,
                RequestStarted: self._started,
                RequestEnded: self._ended,
                GpuSampled: self._gpu,
                ServerStatusChanged: self._status,
                ServerLogLine: self._log,
                Marker: self._marker,
                FleetSampled: self._fleet_sampled,
                CanaryProbed: self._canary.apply,
            },
            name="session fold",
        )
        self.publisher: ViewPublisher[SessionView] = ViewPublisher(
            self.view, min_interval_s=publish_interval_s
        )

    # ------------------------------------------------------------------ folding

    def apply(self, event: Event) -> None:
        """Fold one event (any type). Objects that are not events are ignored."""
        handler = self._handlers.get(type(event))
        if handler is None:
            return
        self.events += 1
        t = event.t
        if isinstance(t, int | float) and (self._t is None or t > self._t):
            self._t = float(t)
        handler(event)
        self.publisher.mark_dirty()

    def _marker(self, e: Marker) -> None:
        self._add_marker(e.t, "user", e.label)

    def _add_marker(self, t: float, kind: MarkerKind, label: str) -> None:
        self._markers.append(MarkerView(t=t, kind=kind, label=label))
        self._markers_added += 1

    # ---------------------------------------- for a reader that follows the fold (the replay)

    @property
    def requests_finished(self) -> int:
        """How many requests have ended: all of them, not only the kept rows."""
        return self._totals.requests

    @property
    def verdict_changes_made(self) -> int:
        """How many verdicts were given or changed: all of them, not only the kept ring."""
        return self._changes_made

    def newest_verdict_changes(self, n: int) -> tuple[VerdictChange, ...]:
        """The newest `n` verdict changes (at most MAX_VERDICT_CHANGES kept), oldest first: a
        reader that follows the fold (the replay's timeline) sees every request's verdict as
        every screen counts it, not only the kept rows'."""
        if n <= 0:
            return ()
        kept = len(self._changes)
        return tuple(self._changes[i] for i in range(max(0, kept - n), kept))

    @property
    def markers_added(self) -> int:
        """How many markers have been added: all of them, not only the kept ring."""
        return self._markers_added

    def newest_markers(self, n: int) -> tuple[MarkerView, ...]:
        """The newest `n` markers (at most the MAX_MARKERS kept), oldest first."""
        if n <= 0:
            return ()
        kept = len(self._markers)
        return tuple(self._markers[i] for i in range(max(0, kept - n), kept))

    def _chunk(self, e: StreamChunk) -> None:
        self._trace(e.request_id, None).trace.add(e)
        self._diagnosis.text(e.request_id, e.text)

    def _server(self, source: str) -> ServerState:
        server = self._servers.get(source)
        if server is None:
            keep = max(self.window_seconds * 2 + 5, PENDING_METRICS_SECONDS + 5)
            server = ServerState(
                source=source,
                bank=CounterBank(keep_seconds=keep, max_points=4096),
                history=deque(maxlen=self.history_points),
                identity=server_identity(self.info, source),
                latency_bank=CounterBank(keep_seconds=keep, max_points=4096),
            )
            self._servers[source] = server
        return server

    def _scraped(self, e: MetricsScraped) -> None:
        s = self._server(e.source)
        if s.scraped(e, self.window_seconds):
            self._add_marker(e.t, "counter_reset", f"counters reset on {e.source}")
        running = s.running()
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
                self._replace_row(p.request_id, spec_decode_stats(deltas))
            elif (gen is None or gen < p.tokens) and t - p.t_end <= PENDING_METRICS_SECONDS:
                keep.append(p)
        self._pending = keep

    def _replace_row(self, request_id: str, st: Any) -> None:
        rows = self._rows
        for i in range(len(rows) - 1, -1, -1):
            if rows[i].request_id == request_id:
                rows[i] = with_metrics(rows[i], st)
                self._rows_cache = None
                return

    def _trace(self, request_id: str, started: RequestStarted | None) -> InFlight:
        f = self._in_flight.get(request_id)
        if f is None:
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                oldest = next(iter(self._in_flight))
                del self._in_flight[oldest]
                self._lost_in_flight += 1
            f = InFlight(
                trace=RequestTrace(request_id),
                source=started.source if started else "",
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
        self._gpu_view_cache = None
        self._diagnosis.gpu_limits(
            tuple(
                PowerLimitView(
                    gpu_index=r.index,
                    requested_w=finite(r.power_limit_requested_w),
                    enforced_w=finite(r.power_limit_w),
                    default_w=finite(r.power_limit_default_w),
                    differs=(
                        r.power_limit_requested_w is not None
                        and r.power_limit_w is not None
                        and abs(r.power_limit_requested_w - r.power_limit_w) >= 1.0
                    ),
                )
                for r in e.gpus
                if r.power_limit_w is not None or r.power_limit_requested_w is not None
            )
        )
        for r in e.gpus:
            ring = self._gpu_history.get(r.index)
            if ring is None:
                ring = self._gpu_history[r.index] = deque(maxlen=self.history_points)
            ring.append(  # finite at entry, so a view copies columns without checks
                (
                    e.t,
                    finite(r.temperature_c),
                    finite(r.power_w),
                    finite(r.sm_clock_mhz),
                    r.memory_used_bytes,
                    finite(r.utilization_pct),
                )
            )
            if self._in_flight and vanilla.throttle_evidence((r,)) is not None:
                for f in self._in_flight.values():
                    if len(f.throttle) < MAX_THROTTLE_READINGS:
                        f.throttle.append(r)

    def _status(self, e: ServerStatusChanged) -> None:
        if e.status == "removed":  # no longer watched: its row leaves the view
            if self._servers.pop(e.source, None) is not None:
                self._add_marker(e.t, "status", f"{e.source}: removed")
            return
        s = self._server(e.source)
        if s.status != e.status:
            self._add_marker(e.t, "status", f"{e.source}: {e.status}")
        s.set_status(e.status, e.detail, e.t)

    def _fleet_sampled(self, e: FleetSampled) -> None:
        for t, label in self._fleet.apply(e):
            self._add_marker(t, "status", label)

    def _log(self, e: ServerLogLine) -> None:
        parsed = parse_log_line(e.line, vllm_version=self.info.vllm_version)
        self._server(e.source).logged(e.line, parsed, e.t)

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
        # The judge reads the best per-request acceptance it has at the end: the server's own
        # object when valid (stats.server_spec), else the chunks' AL; /metrics comes later.
        verdict = vanilla.judge(stats, ctx)
        quality = self._diagnose(stats, f, verdict, n_spec)
        row = build_row(stats, verdict, f, n_spec)
        if quality is not None and quality.flag is not None:
            row = replace(row, quality=quality.flag, quality_evidence=quality.evidence)
        self._rows_cache = None
        self._pct_cache = None
        self._itl.extend(stats.itl_s)
        tot = self._totals
        tot.requests += 1
        tot.outcomes[stats.outcome] = tot.outcomes.get(stats.outcome, 0) + 1
        if stats.outcome == "ok":  # a failed or cancelled request's speed is not a measurement
            for key in ("decode_tok_s", "e2e_tok_s", "ttft_s", "client_acceptance_length"):
                tot.add(key, getattr(stats, key))
        self._add_row(row, self._clock_scale(stats))
        if (
            stats.outcome == "ok"
            and f.overlap == 0
            and f.before is not None
            and stats.completion_tokens
        ):
            self._pending.append(
                _Pending(e.request_id, f.source, f.before, stats.completion_tokens, e.t)
            )
            self._pending = self._pending[-MAX_PENDING:]

    def _clock_scale(self, stats: Any) -> float:
        """What turns this answer's speed into one at the reference clock (speed_class, step
        5): the thermal fit's step time at the answer's clock over that at the reference
        clock; 1.0 without GPU samples during it or while the fit is not usable."""
        ring = next(iter(self._gpu_history.values()), None)
        if ring is None or stats.t_first_token is None or stats.t_last_token is None:
            return 1.0
        clock = gpu_during((p[:4] for p in ring), stats.t_first_token, stats.t_last_token)[0]
        if clock is None or clock <= 0:
            return 1.0
        if self._ref_clock is None:
            self._ref_clock = clock
        fit = self._diagnosis.fit
        if not fit.usable():
            return 1.0
        now, ref = fit.predict(clock), fit.predict(self._ref_clock)
        if now is None or ref is None or now <= 0 or ref <= 0:
            return 1.0
        scale = now / ref
        return scale if math.isfinite(scale) else 1.0

    def _add_row(self, row: RequestRow, scale: float = 1.0) -> None:
        """Keep a finished row and give it its verdict: quality first (a flagged answer sets no
        speed level), then its speed class against the speed levels, now if they exist (and
        existed at the previous answer's end too: levels that show once and vanish are noise),
        else once they do (core.detectors.speed_class, step 4)."""
        measured = row.outcome == "ok" and row.decode_tok_s is not None
        levels = None
        transition: SpeedClassView | None = None
        if measured and row.decode_tok_s is not None:
            self._speeds.append(row.decode_tok_s * scale if row.quality is None else None)
            self._als.append(_row_al(row) if row.quality is None else None)
            self._cycle_dirty = True
            now = speed_levels(self._speeds, als=self._als)
            levels = now if self._had_levels else None
            self._had_levels = now is not None
        if row.outcome == "ok":
            waits = measured and row.quality is None and levels is None
            kind = speed_class(
                row.decode_tok_s, row.vanilla, levels, clock_scale=scale, al=_row_al(row)
            )
            between = kind is not None and kind.kind == "transition" and row.quality is None
            if between and kind is not None:
                transition, kind = kind, waiting(kind)  # one once the answers after it say so
            row = replace(row, speed_class=kind, settled=not waits and not between)
        self._rows.append(row)
        self._given(row, None)
        if not measured or row.decode_tok_s is None:
            return
        if row.quality is None:
            self._known_speeds += 1
            if levels is None:
                self._unsettled.append((row.request_id, self._known_speeds, scale))
            elif not row.settled and transition is not None:
                self._between.append((row.request_id, self._known_speeds, levels, transition))
        if levels is not None:
            pending = [(rid, n, k) for rid, n, k in self._unsettled]
            self._unsettled.clear()
            for rid, n, k in pending:
                self._settle(rid, levels, k, n)
        while self._unsettled and self._known_speeds - self._unsettled[0][1] >= DEFAULT_WINDOW:
            self._settle(self._unsettled.popleft()[0], None)  # left the window: one level
        self._judge_between()

    def _judge_between(self) -> None:
        """Judge the rows classed transition again as answers after them are known: a
        transition only at a change of level (shown ok until an answer after it is at a level),
        and, once NEIGHBOURS_AFTER later speeds are known, among its neighbours, then settled
        (speed_class, step 6)."""
        if not self._between:
            return
        known = [x for x in self._speeds if x is not None]
        keep = []
        for request_id, n, levels, view in self._between:
            later = self._known_speeds - n
            at = len(known) - 1 - later
            judged = at_change_of_level(view, known, at, levels)
            if judged is None:  # no answer after it at a level yet
                keep.append((request_id, n, levels, view))
                continue
            if later >= NEIGHBOURS_AFTER or judged.kind != "transition":
                final = among_neighbours(judged, known, at)
                self._rejudge(
                    request_id, lambda r, v=final: replace(r, speed_class=v, settled=True)
                )
                continue
            self._rejudge(request_id, lambda r, v=judged: replace(r, speed_class=v))
            keep.append((request_id, n, levels, view))
        self._between = keep

    def _rejudge(self, request_id: str, judge: Any) -> None:
        """Replace the kept row `request_id` with judge(row), counting its verdict again."""
        rows = self._rows
        for i in range(len(rows) - 1, -1, -1):
            row = rows[i]
            if row.request_id == request_id:
                new = judge(row)
                rows[i] = new
                self._given(new, row)
                self._rows_cache = None
                return

    def _settle(self, request_id: str, levels: Any, scale: float = 1.0, n: int = 0) -> None:
        """Class an unsettled row against `levels` (None: no levels while it was in the window);
        a transition waits to be judged among its neighbours (`n`: _known_speeds at its end)."""

        def judge(row: RequestRow) -> RequestRow:
            kind = speed_class(
                row.decode_tok_s, row.vanilla, levels, clock_scale=scale, al=_row_al(row)
            )
            between = levels is not None and kind is not None and kind.kind == "transition"
            if between and levels is not None and kind is not None:
                self._between.append((request_id, n, levels, kind))
                kind = waiting(kind)
            return replace(row, speed_class=kind, settled=not between)

        self._rejudge(request_id, judge)

    def _given(self, row: RequestRow, before: RequestRow | None) -> None:
        """Count a row's verdict (in place of its verdict before, if any); note a change."""
        kind = request_verdict(row).kind
        old = request_verdict(before).kind if before is not None else None
        if kind == old:
            return
        if old is not None:
            self._totals.count(old, -1)
        self._totals.count(kind, 1)
        if old is not None or kind in FLAGGED:
            self._changes.append(VerdictChange(row.request_id, row.t_end, kind))
            self._changes_made += 1

    def _diagnose(
        self, stats: Any, f: InFlight, verdict: vanilla.VanillaVerdict, n_spec: int | None
    ) -> QualityVerdict | None:
        """Feed a finished answer to the diagnosis fold (core.diagnosis); the quality sentinel's
        verdict on it."""
        if stats.outcome != "ok":
            self._diagnosis.drop(stats.request_id)
            return None
        al = stats.client_acceptance_length
        if stats.server_spec is not None and stats.server_spec.mean_acceptance_length is not None:
            al = stats.server_spec.mean_acceptance_length
        ring = next(iter(self._gpu_history.values()), None)
        return self._diagnosis.answer(
            FinishedAnswer(
                request_id=stats.request_id,
                t=stats.t_end,
                prompt_tokens=stats.prompt_tokens,
                cumulative=tuple(f.trace.chunk_cum),
                final_cut=f.trace.final_cut,
                completion_tokens=stats.completion_tokens,
                t_first_token=stats.t_first_token,
                t_last_token=stats.t_last_token,
                decode_steps=stats.decode_chunks,
                acceptance_length=al,
                n_spec=n_spec,
                judge_reason=verdict.reasons[0][1] if verdict.flagged and verdict.reasons else None,
                partial=stats.partial,
            ),
            (p[:4] for p in ring) if ring is not None else (),
            self.baseline_tok_s,
        )

    # ------------------------------------------------------------------ views

    def publish_if_due(self, now: float) -> bool:
        """Rebuild and publish the view when events changed the state and the last publish is at
        least the publish interval old (call on the hub thread, under the hub's lock)."""
        return self.publisher.publish_if_due(now)

    def publish(self) -> SessionView:
        """Rebuild and publish the view now (under the hub's lock); returns it."""
        return self.publisher.publish()

    @property
    def published_view(self) -> SessionView | None:
        """The last published view (None before the first publish): read without a lock."""
        return self.publisher.current

    def view(self) -> SessionView:
        """Build the typed view of everything shown (call under the hub's lock)."""
        rows = self._classed_rows()
        tot = self._totals
        return SessionView(
            t=self._t,
            info=self.info,
            simulated=self.info.simulated,
            baseline_tok_s=finite(self.baseline_tok_s),
            baseline_from=self.baseline_from if finite(self.baseline_tok_s) is not None else None,
            window_seconds=self.window_seconds,
            servers=self.server_views(),
            rows=rows,
            in_flight=tuple(
                build_row(request_stats(f.trace, n_spec=n_spec), None, f, n_spec)
                for f in self._in_flight.values()
                for n_spec in (self._context(f.source)[1],)
            ),
            summary=SummaryView(
                total=tot.requests,
                ok=tot.outcomes.get("ok", 0),
                failed=tot.outcomes.get("failed", 0),
                cancelled=tot.outcomes.get("cancelled", 0),
                flagged=tot.flagged,
                vanilla_speed=tot.verdicts.get("vanilla-speed", 0),
                transition=tot.verdicts.get("transition", 0),
                loop=tot.verdicts.get("loop", 0),
                garbled=tot.verdicts.get("garbled", 0),
                rows_kept=len(rows),
                rows_dropped=tot.requests - len(rows),
                lost_in_flight=self._lost_in_flight,
                mean_decode_tok_s=tot.mean("decode_tok_s"),
                mean_e2e_tok_s=tot.mean("e2e_tok_s"),
                mean_ttft_s=tot.mean("ttft_s"),
                mean_client_acceptance_length=tot.mean("client_acceptance_length"),
            ),
            percentiles=self._percentiles(rows),
            gpu=self._gpu_view(),
            markers=tuple(self._markers),
            cycle=self._cycle(),
            events=self.events,
            canaries=self._canary.views(),
            diagnosis=self._diagnosis.view(finite(self.baseline_tok_s)),
        )

    def server_views(self) -> tuple[ServerView, ...]:
        """The servers' views alone, as in `view()` but without building the rest (the replay
        takes one a recorded second for its graphs)."""
        return (
            tuple(s.view(self.window_seconds) for s in self._servers.values()) + self._fleet.views()
        )

    def _classed_rows(self) -> tuple[RequestRow, ...]:
        """The kept rows, each with its verdict's inputs as settled (see `_add_row`)."""
        if self._rows_cache is None:
            self._rows_cache = tuple(self._rows)
        return self._rows_cache

    def snapshot(self) -> dict[str, Any]:
        """Everything shown, as plain JSON-serialisable data (docs/watch-json.md)."""
        return snapshot_of(self.view())

    def _percentiles(self, rows: tuple[RequestRow, ...]) -> PercentilesView:
        if self._pct_cache is None:
            done = [r for r in rows if r.outcome == "ok"]
            self._pct_cache = PercentilesView(
                ttft_s=_pct(r.ttft_s for r in done if r.ttft_s is not None),
                tpot_s=_pct(r.tpot_s for r in done if r.tpot_s is not None),
                e2el_s=_pct(r.e2el_s for r in done if r.e2el_s is not None),
                decode_tok_s=_pct(r.decode_tok_s for r in done if r.decode_tok_s is not None),
                itl_s=_pct(self._itl),
            )
        return self._pct_cache

    def _gpu_view(self) -> GpuView:
        if self._gpu_view_cache is None:
            self._gpu_view_cache = self._build_gpu_view()
        return self._gpu_view_cache

    def _build_gpu_view(self) -> GpuView:
        last = self._gpu_last
        return GpuView(
            source=last.source if last else None,
            t=last.t if last else None,
            error=last.error if last else None,
            gpus=last.gpus if last else (),
            history=tuple(
                GpuHistory(index, *(zip(*ring, strict=True) if ring else ((),) * 6))
                for index, ring in self._gpu_history.items()
            ),
        )

    def _cycle(self) -> CycleView | None:
        if self._cycle_dirty:
            self._cycle_dirty = False
            speeds = list(self._speeds)
            report = detect_cycle(speeds)
            known = [x for x in speeds if x is not None]
            long_run = sum(known) / len(known) if known else None
            if report is None:
                self._cycle_cache = CycleView(
                    requests=len(speeds), long_run_mean_tok_s=long_run, detected=False
                )
            else:
                self._cycle_cache = CycleView(
                    requests=len(speeds),
                    long_run_mean_tok_s=long_run,
                    detected=True,
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
                    period_min=report.period_min,
                    period_max=report.period_max,
                    period_mean=report.period_mean,
                    episodes=report.episodes,
                    stray_episodes=report.stray_episodes,
                )
        return self._cycle_cache
