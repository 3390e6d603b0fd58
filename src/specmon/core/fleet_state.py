"""The fold of `FleetSampled` events: every vLLM target a Prometheus scrapes becomes a
`ServerView` (origin "prometheus").

The Prometheus gives rates (PromQL `rate()` over its window, which handles counter resets) and
the counters' latest absolute values; the ratios are computed here, as vLLM's Grafana
spec-decode dashboard computes them:

- acceptance length = 1 + rate(accepted) / rate(drafts);
- draft acceptance rate = rate(accepted) / rate(draft tokens);
- per-position rate i = rate(accepted_per_pos{position=i}) / rate(drafts);
- decode tok/s = rate(generation tokens).

A zero draft rate gives None ("—"), never 1.0. Since-start numbers use the absolute values the
same way. Targets appear when a read lists them and disappear when a successful read no longer
does; a failed read keeps every target of that Prometheus with its last values, marked stale.
History: a range read replaces a target's older history (the last hour the Prometheus keeps);
each instant read after it appends one point.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from specmon.core.events import FleetHistory, FleetSampled, FleetTarget, ServerStatus
from specmon.core.fleet_views import PER_REQUEST_NOT_AVAILABLE, FleetTargetInfo
from specmon.core.gauge_ranges import COUNT, FRACTION, gauge_note, in_range
from specmon.core.numbers import finite
from specmon.core.server_state import HistoryPoint, history_columns
from specmon.core.views import (
    LifetimeNumbers,
    LogView,
    ServerHistory,
    ServerView,
    SessionTotals,
    WindowNumbers,
)

MAX_RANGE_POINTS = 1440
"""Most points kept from one range read (an hour at 2.5 s steps)."""

"""(t, decode tok/s, AL, requests running, KV usage fraction)."""

TargetKey = tuple[str, str, str]
"""(Prometheus URL, job, instance)."""


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return finite(num / den)


def acceptance_length(accepted: float | None, drafts: float | None) -> float | None:
    """1 + accepted / drafts (rates or absolute values); None when there were no drafts."""
    r = _ratio(accepted, drafts)
    return None if r is None else 1.0 + r


def per_position(
    accepted_per_pos: tuple[float, ...] | None, drafts: float | None
) -> tuple[float, ...] | None:
    if not accepted_per_pos or drafts is None or drafts <= 0:
        return None
    rates = tuple(finite(p / drafts) for p in accepted_per_pos)
    if any(r is None for r in rates):
        return None
    return tuple(r for r in rates if r is not None)


def target_source(target: FleetTarget) -> str:
    """The name a fleet target goes by in views: where it is scraped, else its instance."""
    url = target.url
    if url:
        for suffix in ("/metrics",):
            if url.endswith(suffix):
                url = url[: -len(suffix)]
        return url
    return target.instance


@dataclass(slots=True)
class _Target:
    prometheus: str
    source: str
    last: FleetTarget
    read_t: float
    rate_window_s: float
    status: ServerStatus
    detail: str
    status_t: float
    range_points: tuple[HistoryPoint, ...] = ()
    history_step_s: float | None = None
    recent: deque[HistoryPoint] = field(default_factory=deque)
    view: ServerView | None = None


def _status_of(target: FleetTarget) -> tuple[ServerStatus, str]:
    if target.health == "down":
        return "down", "the Prometheus cannot scrape it: " + (target.last_error or "down")
    return "up", ""


def _kv(value: float | None, notes: list[str] | None = None) -> float | None:
    """A KV usage fraction the Prometheus gave, None when it is not one (core.gauge_ranges)."""
    return in_range("kv_cache_usage", finite(value), FRACTION, [] if notes is None else notes)


def _count(name: str, value: float | None, notes: list[str] | None = None) -> float | None:
    return in_range(name, finite(value), COUNT, [] if notes is None else notes)


def _point(t: float, target: FleetTarget) -> HistoryPoint:
    return (
        t,
        finite(target.generation_tok_s),
        acceptance_length(target.accepted_per_s, target.drafts_per_s),
        _count("requests_running", target.requests_running),
        _kv(target.kv_cache_usage_frac),
        _ratio(target.accepted_per_s, target.draft_tokens_per_s),
        acceptance_length(target.accepted_tokens, target.drafts),
        _ratio(target.accepted_tokens, target.draft_tokens),
    )


def _range_points(t: float, h: FleetHistory) -> tuple[HistoryPoint, ...]:
    n = min(len(h.ago_s), MAX_RANGE_POINTS)
    start = len(h.ago_s) - n
    return tuple(
        (
            t - h.ago_s[i],
            finite(h.generation_tok_s[i]),
            acceptance_length(h.accepted_per_s[i], h.drafts_per_s[i]),
            _count("requests_running", h.requests_running[i]),
            _kv(h.kv_cache_usage_frac[i]),
            None,  # the range query reads no draft-token rate and no absolute counters
            None,
            None,
        )
        for i in range(start, len(h.ago_s))
    )


class FleetState:
    """Targets read through one or more Prometheus servers, folded into server views."""

    def __init__(self, history_points: int = 600) -> None:
        self.history_points = max(history_points, 2)
        self._targets: dict[TargetKey, _Target] = {}
        self._cache: tuple[ServerView, ...] | None = None
        self.errors: dict[str, str | None] = {}
        """Each Prometheus's last read error (None: its last read succeeded)."""

    def __len__(self) -> int:
        return len(self._targets)

    def apply(self, e: FleetSampled) -> list[tuple[float, str]]:
        """Fold one read; returns the status changes it caused as (t, label) for markers."""
        self._cache = None
        changes: list[tuple[float, str]] = []
        mine = {k: v for k, v in self._targets.items() if k[0] == e.source}
        failing_before = self.errors.get(e.source) is not None
        self.errors[e.source] = e.error
        if e.error is not None and not failing_before:
            changes.append((e.t, f"Prometheus {e.source}: not answering ({e.error})"))
        elif e.error is None and failing_before:
            changes.append((e.t, f"Prometheus {e.source}: answering again"))
        if e.error is not None:
            for tgt in mine.values():
                if tgt.status != "stale":
                    changes.append((e.t, f"{tgt.source}: stale"))
                tgt.status, tgt.status_t = "stale", e.t
                tgt.detail = (
                    f"Prometheus not answering ({e.error}); last values from "
                    f"{e.t - tgt.read_t:.0f} s ago"
                )
                tgt.view = None
            return changes
        seen: set[TargetKey] = set()
        for target in e.targets:
            key = (e.source, target.job, target.instance)
            seen.add(key)
            status, detail = _status_of(target)
            found = self._targets.get(key)
            if found is None:
                source = target_source(target)
                if any(t.source == source for t in self._targets.values()):
                    source = f"{source} ({target.job})"  # one address, several jobs
                tgt = self._targets[key] = _Target(
                    prometheus=e.source,
                    source=source,
                    last=target,
                    read_t=e.t,
                    rate_window_s=e.rate_window_s,
                    status=status,
                    detail=detail,
                    status_t=e.t,
                    recent=deque(maxlen=self.history_points),
                )
                changes.append((e.t, f"{tgt.source}: {status} (Prometheus)"))
            else:
                tgt = found
                if tgt.status != status:
                    changes.append((e.t, f"{tgt.source}: {status}"))
                    tgt.status_t = e.t
            tgt.last, tgt.read_t, tgt.rate_window_s = target, e.t, e.rate_window_s
            tgt.status, tgt.detail = status, detail
            tgt.recent.append(_point(e.t, target))
            tgt.view = None
        for key, tgt in mine.items():
            if key not in seen:
                del self._targets[key]
                changes.append((e.t, f"{tgt.source}: gone from the Prometheus"))
        for h in e.history:
            hist = self._targets.get((e.source, h.job, h.instance))
            if hist is None:
                continue
            tgt = hist
            tgt.range_points = _range_points(e.t, h)
            tgt.history_step_s = h.step_s
            # The range ends at this read: instant points before it are covered by it.
            tgt.recent.clear()
            tgt.view = None
        return changes

    def views(self) -> tuple[ServerView, ...]:
        if self._cache is None:
            out = []
            for tgt in self._targets.values():
                if tgt.view is None:
                    tgt.view = _build_view(tgt)
                out.append(tgt.view)
            self._cache = tuple(out)
        return self._cache


def _build_view(tgt: _Target) -> ServerView:
    x = tgt.last
    points = tgt.range_points + tuple(tgt.recent)
    columns = history_columns(points)
    has_spec = x.drafts is not None or x.drafts_per_s is not None
    rates = per_position(x.accepted_per_pos_per_s, x.drafts_per_s)
    notes: list[str] = []
    running = _count("requests_running", x.requests_running, notes)
    waiting = _count("requests_waiting", x.requests_waiting, notes)
    kv = _kv(x.kv_cache_usage_frac, notes)
    return ServerView(
        source=tgt.source,
        status=tgt.status,
        status_detail=tgt.detail,
        status_since=tgt.status_t,
        last_scrape_t=tgt.read_t,
        spec_configured=has_spec,
        n_spec=len(x.accepted_per_pos) if x.accepted_per_pos else None,
        engines=(),
        window=WindowNumbers(
            window_seconds=tgt.rate_window_s,
            decode_tok_s=finite(x.generation_tok_s),
            acceptance_length=acceptance_length(x.accepted_per_s, x.drafts_per_s),
            draft_acceptance_rate=_ratio(x.accepted_per_s, x.draft_tokens_per_s),
            per_position_rates=rates,
        ),
        lifetime=LifetimeNumbers(
            since_reset_t=None,
            generation_tokens=finite(x.generation_tokens),
            drafts=finite(x.drafts),
            draft_tokens=finite(x.draft_tokens),
            accepted_tokens=finite(x.accepted_tokens),
            acceptance_length=acceptance_length(x.accepted_tokens, x.drafts),
            draft_acceptance_rate=_ratio(x.accepted_tokens, x.draft_tokens),
            per_position_rates=per_position(x.accepted_per_pos, x.drafts),
        ),
        v0_draft_acceptance_rate=None,
        requests_running=running,
        requests_waiting=waiting,
        kv_cache_usage_frac=kv,
        totals=SessionTotals(None, None, None, None),
        counter_resets=0,
        recent_resets=(),
        history=ServerHistory(*columns),
        log=LogView(lines=0, tail=(), spec_decoding=None, engine=None),
        origin="prometheus",
        per_request_note=PER_REQUEST_NOT_AVAILABLE,
        fleet=FleetTargetInfo(
            prometheus=tgt.prometheus,
            job=x.job,
            instance=x.instance,
            health=x.health,
            last_error=x.last_error,
            rate_window_s=tgt.rate_window_s,
            last_read_t=tgt.read_t,
            gpus=x.gpus,
            history_step_s=tgt.history_step_s,
        ),
        gauge_note=gauge_note(notes),
    )
