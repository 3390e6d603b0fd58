"""One attached server's state: its counters (window and since-start numbers), gauges, status,
log tail and history, folded from MetricsScraped / ServerStatusChanged / ServerLogLine events,
and its `ServerView`.

Window numbers come from counter DELTAS over the last `window_seconds` (core.counters); since-start
numbers come from the counters' ABSOLUTE values on the latest scrape (since the server started, or
since its last counter reset), so a server that served requests before the watch began still
shows its lifetime acceptance. Absolute values that are garbage give None with a note; so do
gauges (and an engine log line's KV usage, hit rate and request counts) outside their range
(core.gauge_ranges: a fraction 0 to 1, a count 0 or more), in `gauge_note`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specmon.core import families
from specmon.core.counters import CounterBank, CounterReset, CounterWindow, sum_by_name
from specmon.core.events import MetricSample, MetricsScraped, ServerStatus
from specmon.core.gauge_ranges import COUNT, FRACTION, checked_gauges, gauge_note, in_range
from specmon.core.histogram_quantiles import histogram_latency
from specmon.core.log_lines import EngineLog, SpecDecodingLog
from specmon.core.numbers import finite
from specmon.core.server_identities import ServerIdentityView
from specmon.core.specdecode import (
    decode_tokens_per_second,
    gauge_max,
    gauge_sum,
    n_spec_of,
    per_position_deltas,
    spec_configured,
    spec_decode_stats,
)
from specmon.core.views import (
    EngineLogView,
    EngineView,
    HistogramLatency,
    LifetimeNumbers,
    LogView,
    ResetView,
    ServerHistory,
    ServerView,
    SessionTotals,
    SpecLogView,
    WindowNumbers,
)

MAX_RESETS_KEPT = 50
MAX_LOG_TAIL = 100
MAX_LOG_LINE_CHARS = 2000

_Num = float | None
HistoryPoint = tuple[float, _Num, _Num, _Num, _Num, _Num, _Num, _Num]
"""One scrape's entry of `ServerHistory`, its columns in order: t, decode tok/s, AL, requests
running, KV usage fraction, draft acceptance rate, since-start AL, since-start acceptance rate."""

HISTORY_COLUMNS = 8


def history_columns(points: Iterable[HistoryPoint]) -> tuple[tuple[Any, ...], ...]:
    """`HistoryPoint`s (oldest first) as the parallel columns of a `ServerHistory`."""
    points = tuple(points)
    return tuple(zip(*points, strict=True)) if points else ((),) * HISTORY_COLUMNS


_LIFETIME_NAMES = (
    families.GENERATION_TOKENS,
    families.SPEC_DRAFTS,
    families.SPEC_DRAFT_TOKENS,
    families.SPEC_ACCEPTED,
    families.SPEC_ACCEPTED_PER_POS,
)


def lifetime_numbers(
    samples: Iterable[MetricSample], since_reset_t: float | None
) -> LifetimeNumbers:
    """Since-start numbers from one page's absolute counter values (summed over engines).

    AL = 1 + accepted/drafts, draft acceptance rate = accepted/draft tokens, per-position rate i =
    accepted_per_pos[i]/drafts, as for windows but on absolute values. A value that is negative
    or not finite makes its family unknown; accepted above draft tokens, or a position above the
    drafts, makes the ratios unknown: a note says why, and nothing wrong is shown.
    """
    page = [s for s in samples if s.name in _LIFETIME_NAMES]
    bad = sorted({s.name for s in page if not math.isfinite(s.value) or s.value < 0})
    notes: list[str] = []
    if bad:
        notes.append("garbage absolute values in " + ", ".join(bad))
    good = {(s.name, s.labels): s.value for s in page if s.name not in bad}
    gen = sum_by_name(good, families.GENERATION_TOKENS)
    drafts = sum_by_name(good, families.SPEC_DRAFTS)
    draft_tokens = sum_by_name(good, families.SPEC_DRAFT_TOKENS)
    accepted = sum_by_name(good, families.SPEC_ACCEPTED)
    # One garbage spec family makes every ratio suspect: the page is not to be trusted.
    ratios_ok = not (set(bad) & set(_LIFETIME_NAMES[1:]))
    if accepted is not None and draft_tokens is not None and accepted > draft_tokens:
        notes.append(f"accepted {accepted:g} above draft tokens {draft_tokens:g}")
        ratios_ok = False
    per_pos = per_position_deltas(good)
    if per_pos and drafts is not None and any(v > drafts for v in per_pos.values()):
        notes.append("a position's accepted count is above the drafts")
        ratios_ok = False
    al = rate = None
    rates: tuple[float, ...] | None = None
    if ratios_ok:
        st = spec_decode_stats(good)
        al, rate, rates = st.acceptance_length, st.draft_acceptance_rate, st.per_position_rates
    return LifetimeNumbers(
        since_reset_t=since_reset_t,
        generation_tokens=gen,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        acceptance_length=finite(al),
        draft_acceptance_rate=finite(rate),
        per_position_rates=rates,
        note="; ".join(notes) or None,
    )


def _engine_label(labels: Iterable[tuple[str, str]]) -> str | None:
    for key, value in labels:
        if key == "engine":
            return value
    return None


def engine_numbers(
    window: CounterWindow | None, gauges: Iterable[MetricSample], engines: Iterable[str]
) -> tuple[EngineView, ...]:
    """Each engine's window numbers: the window's counter deltas and the page's gauges filtered
    to the series whose `engine` label is that engine, through the same formulas as the server's
    (decode tok/s = Δgeneration/Δt, AL = 1 + Δaccepted/Δdrafts, rate = Δaccepted/Δdraft tokens).
    Summed over engines, tok/s and the counts equal the server's; AL and rates are the server's
    pooled over the engines' deltas."""
    gauges = tuple(gauges)
    out: list[EngineView] = []
    for engine in engines:
        tok_s = al = rate = None
        if window is not None:
            deltas = {k: v for k, v in window.deltas.items() if _engine_label(k[1]) == engine}
            sub = CounterWindow(window.t0, window.t1, deltas)
            tok_s = decode_tokens_per_second(sub)
            stats = spec_decode_stats(deltas)
            al, rate = stats.acceptance_length, stats.draft_acceptance_rate
        mine = [g for g in gauges if _engine_label(g.labels) == engine]
        out.append(
            EngineView(
                engine=engine,
                decode_tok_s=finite(tok_s),
                acceptance_length=finite(al),
                draft_acceptance_rate=finite(rate),
                requests_running=finite(gauge_sum(mine, families.REQUESTS_RUNNING)),
                requests_waiting=finite(gauge_sum(mine, families.REQUESTS_WAITING)),
                kv_cache_usage_frac=finite(gauge_max(mine, families.KV_CACHE_USAGE)),
            )
        )
    return tuple(out)


@dataclass(slots=True)
class ServerState:
    """The fold of one server's /metrics, status and log events."""

    source: str
    bank: CounterBank
    history: deque[HistoryPoint]
    status: ServerStatus | None = None
    detail: str = ""
    status_t: float | None = None
    last_scrape_t: float | None = None
    gauges: tuple[MetricSample, ...] = ()
    """The latest page's gauges within their range (core.gauge_ranges)."""
    gauge_notes: tuple[str, ...] = ()
    """Why gauge families of the latest page were dropped (out of range)."""
    spec_configured: bool | None = None
    n_spec: int | None = None
    engines: tuple[str, ...] = ()
    resets: deque[ResetView] = field(default_factory=lambda: deque(maxlen=MAX_RESETS_KEPT))
    reset_count: int = 0
    last_reset_t: float | None = None
    lifetime: LifetimeNumbers | None = None
    spec_log: SpecDecodingLog | None = None
    spec_log_t: float | None = None
    engine_log: EngineLog | None = None
    engine_log_t: float | None = None
    log_tail: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LOG_TAIL))
    log_lines: int = 0
    identity: ServerIdentityView = field(default_factory=ServerIdentityView)
    latency_bank: CounterBank | None = None
    """The TTFT/ITL histogram buckets' counters (families.QUANTILE_HISTOGRAMS), kept apart from
    `bank` so their resets are not counted as more server restarts."""
    _view: ServerView | None = None
    """The view of the current state; None after any change (rebuilt on the next read)."""

    def scraped(self, e: MetricsScraped, window_seconds: float) -> tuple[CounterReset, ...]:
        """Fold one scrape; returns the counter resets it revealed."""
        self._view = None
        counters = [x for x in e.samples if x.name in families.COUNTERS]
        resets = self.bank.observe(e.t, counters)
        if self.latency_bank is not None:
            buckets = [x for x in e.samples if x.name in families.QUANTILE_BUCKET_NAMES]
            self.latency_bank.observe(e.t, buckets)  # resets corrected there, not counted
        for r in resets:
            self.reset_count += 1
            self.last_reset_t = r.t
            self.resets.append(ResetView(r.t, r.name, r.labels, r.before, r.after))
        self.lifetime = lifetime_numbers(e.samples, self.last_reset_t)
        self.gauges, self.gauge_notes = checked_gauges(e.samples)
        self.last_scrape_t = e.t
        # No vllm: family at all (--disable-log-stats): whether speculation runs is unknown.
        self.spec_configured = spec_configured(e.samples) if e.samples else None
        self.n_spec = n_spec_of(e.samples)
        self.engines = tuple(sorted({v for x in e.samples for k, v in x.labels if k == "engine"}))
        if self.status != "up":
            self.status, self.detail, self.status_t = "up", "", e.t
        window = self.bank.window(window_seconds)
        stats = spec_decode_stats(window.deltas) if window else None
        self.history.append(  # finite at entry, so a view copies columns without checks
            (
                e.t,
                finite(decode_tokens_per_second(window)),
                finite(stats.acceptance_length) if stats else None,
                finite(self.running()),
                finite(gauge_max(self.gauges, families.KV_CACHE_USAGE)),
                finite(stats.draft_acceptance_rate) if stats else None,
                finite(self.lifetime.acceptance_length) if self.lifetime else None,
                finite(self.lifetime.draft_acceptance_rate) if self.lifetime else None,
            )
        )
        return resets

    def running(self) -> float | None:
        return gauge_sum(self.gauges, families.REQUESTS_RUNNING)

    def set_status(self, status: ServerStatus, detail: str, t: float) -> None:
        self.status, self.detail, self.status_t = status, detail, t
        self._view = None

    def logged(self, line: str, parsed: SpecDecodingLog | EngineLog | None, t: float) -> None:
        self._view = None
        self.log_lines += 1
        self.log_tail.append(line[:MAX_LOG_LINE_CHARS])
        if isinstance(parsed, SpecDecodingLog):
            self.spec_log, self.spec_log_t = parsed, t
        elif isinstance(parsed, EngineLog):
            self.engine_log, self.engine_log_t = parsed, t

    def view(self, window_seconds: float) -> ServerView:
        """The server's view; built once per change (scrape, status, log line)."""
        if self._view is None:
            self._view = self._build_view(window_seconds)
        return self._view

    def _latency(self, window_seconds: float) -> HistogramLatency | None:
        if self.latency_bank is None:
            return None
        window = self.latency_bank.window(window_seconds)
        return histogram_latency(window.deltas) if window else None

    def _build_view(self, window_seconds: float) -> ServerView:
        window = self.bank.window(window_seconds)
        stats = spec_decode_stats(window.deltas) if window else None
        totals = self.bank.totals()
        columns = history_columns(self.history)
        notes = list(self.gauge_notes)
        engine_log = _engine_log_view(self.engine_log, self.engine_log_t, notes)
        return ServerView(
            source=self.source,
            status=self.status,
            status_detail=self.detail,
            status_since=self.status_t,
            last_scrape_t=self.last_scrape_t,
            spec_configured=self.spec_configured,
            n_spec=self.n_spec,
            engines=self.engines,
            window=WindowNumbers(
                window_seconds=window.seconds if window else None,
                decode_tok_s=finite(decode_tokens_per_second(window)),
                acceptance_length=finite(stats.acceptance_length) if stats else None,
                draft_acceptance_rate=finite(stats.draft_acceptance_rate) if stats else None,
                per_position_rates=stats.per_position_rates if stats else None,
                latency=self._latency(window_seconds),
            ),
            lifetime=self.lifetime,
            v0_draft_acceptance_rate=finite(
                gauge_max(self.gauges, families.V0_DRAFT_ACCEPTANCE_RATE)
            ),
            requests_running=finite(self.running()),
            requests_waiting=finite(gauge_sum(self.gauges, families.REQUESTS_WAITING)),
            kv_cache_usage_frac=finite(gauge_max(self.gauges, families.KV_CACHE_USAGE)),
            totals=SessionTotals(
                generation_tokens=sum_by_name(totals, families.GENERATION_TOKENS),
                drafts=sum_by_name(totals, families.SPEC_DRAFTS),
                draft_tokens=sum_by_name(totals, families.SPEC_DRAFT_TOKENS),
                accepted_tokens=sum_by_name(totals, families.SPEC_ACCEPTED),
            ),
            counter_resets=self.reset_count,
            recent_resets=tuple(self.resets),
            history=ServerHistory(*columns),
            log=LogView(
                lines=self.log_lines,
                tail=tuple(self.log_tail),
                spec_decoding=_spec_log_view(self.spec_log, self.spec_log_t),
                engine=engine_log,
            ),
            engine_numbers=engine_numbers(window, self.gauges, self.engines),
            model=self.identity.model,
            vllm_version=self.identity.vllm_version,
            gauge_note=gauge_note(notes),
        )


def _spec_log_view(log: SpecDecodingLog | None, t: float | None) -> SpecLogView | None:
    if log is None:
        return None
    return SpecLogView(
        t=t,
        acceptance_length=finite(log.acceptance_length),
        draft_acceptance_rate=finite(log.draft_acceptance_rate),
        accepted_tokens=log.accepted_tokens,
        drafted_tokens=log.drafted_tokens,
        per_position_rates=log.per_position_rates or None,
        format=log.format,
    )


def _engine_log_view(
    log: EngineLog | None, t: float | None, notes: list[str]
) -> EngineLogView | None:
    """The last engine log line's view; its gauges out of range are None, and `notes` says why."""
    if log is None:
        return None
    running = in_range("log: running", log.running, COUNT, notes)
    waiting = in_range("log: waiting", log.waiting, COUNT, notes)
    return EngineLogView(
        t=t,
        engine=log.engine,
        prompt_tok_s=finite(log.prompt_tok_s),
        generation_tok_s=finite(log.generation_tok_s),
        running=None if running is None else log.running,
        waiting=None if waiting is None else log.waiting,
        kv_cache_usage_frac=in_range(
            "log: KV cache usage", finite(log.kv_cache_usage), FRACTION, notes
        ),
        prefix_cache_hit_rate=in_range(
            "log: prefix cache hit rate", finite(log.prefix_cache_hit_rate), FRACTION, notes
        ),
        format=log.format,
    )
