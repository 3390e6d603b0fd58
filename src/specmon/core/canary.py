"""The canary probe's pure logic: its fixed request, the learned baseline, the idle gate, the fold.

The canary is one fixed greedy request (temperature 0, fixed prompt and max_tokens) sent now and
then to a server. With greedy decoding and the same prompt, its acceptance length (AL) depends on
the engine (model, drafter, K, kernels, numerics), not on the workload. So:

- the canary's AL is compared with the AL *this* server+model+draft+method+K gives while it is
  steady (the baseline, kept on disk by sources.canary_store): the learning probes are pooled
  (the last `MAX_LEARNING_PROBES`), and the baseline is the highest group of `LEARN_PROBES`
  probes that agree (within `AGREE_SHARE` of each other), learned only when no pooled probe lies
  far above it (the group is then a degraded stretch: an engine cannot answer a fixed greedy
  request better than it can; `DEGRADED_SHARE`). Probes taken in a slow stretch are so never
  learned as the engine's level (`steady_probes`);
- it has drifted when it falls more than its tolerance below the baseline's mean: the tolerance is
  `NOISE_SIGMAS` times the learned spread (the standard deviation of the agreeing probes; batching
  with live traffic changes numerics a little), at least `MIN_TOLERANCE_AL` and at most
  `MAX_TOLERANCE_SHARE` of the expected AL (so a probe `DEGRADED_SHARE` below it is never ok);
  `CONFIRM_PROBES` probes in a row beyond it flag the engine as drifted, with the advice to
  restart the server. A probe far above the baseline goes back to the pool: the baseline was
  learned in a slow stretch after all, and is learned again;
- the live traffic's AL (from the /metrics counters between two probes) is reported next to it:
  live AL moved while the canary held = the workload changed; the canary moved = the engine did.

The gate: a probe is sent only when live traffic generated tokens since the previous probe (the
server's `vllm:generation_tokens_total` grew by more than the canary's own tokens), so an idle
server is never woken up and never shows phantom batches.

Pure: no I/O, no clock (times come from the events).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from specmon.core import families
from specmon.core.counters import counter_increase
from specmon.core.events import CanaryProbed, MetricSample
from specmon.core.safe_json import JsonError, loads_bounded

CANARY_PROMPT = (
    "List the first twenty prime numbers, then explain in three short sentences why there are "
    "infinitely many primes."
)
"""The canary's fixed prompt: ordinary, answerable the same way every time."""
CANARY_MAX_TOKENS = 128
"""The canary's fixed answer length (tokens)."""
CANARY_TEMPERATURE = 0.0
"""Greedy: the same answer every time on an unchanged engine."""
DEFAULT_INTERVAL_S = 300.0
"""`watch --canary` without a value: one probe every 5 minutes at most."""
MIN_INTERVAL_S = 10.0
MAX_INTERVAL_S = 86_400.0
LEARN_PROBES = 5
"""Agreeing probes that form the baseline of a new server+model+draft+method+K."""
MAX_LEARNING_PROBES = 12
"""Learning probes pooled (the oldest out first) while they do not agree yet."""
AGREE_SHARE = 0.25
"""Probes agree when each is within this share of the group's highest (below DEGRADED_SHARE, so a
group never mixes steady probes with degraded ones; wide enough for a server's batching noise)."""
DEGRADED_SHARE = 0.30
"""A group of probes this far (relative) below another pooled probe is a degraded stretch, not
the engine's level; and a probe this far below the expected AL is never ok."""
NOISE_SIGMAS = 3.0
MIN_TOLERANCE_AL = 0.15
"""The smallest tolerance (AL): greedy answers vary a little with the batch they share."""
MAX_TOLERANCE_SHARE = 0.25
"""The largest tolerance, as a share of the expected AL (below DEGRADED_SHARE)."""
CONFIRM_PROBES = 2
"""Probes in a row beyond the tolerance before the engine is flagged as drifted."""
WORKLOAD_SHIFT = 0.15
"""Live AL this far (relative) from its level while the baseline was learned = the workload
changed (when the canary held)."""
HISTORY = 64
"""Probes kept per server for the view (bounded over any session length)."""
MAX_AL = 1000.0
"""The largest AL accepted when K is not known (with K, the largest is K + 1)."""

CanaryStatus = Literal["learning", "ok", "drifting", "drifted", "failed"]
CanaryDiagnosis = Literal["learning", "steady", "engine_drift", "workload_change", "unknown"]


# ---------------------------------------------------------------- identity and baseline


@dataclass(frozen=True, slots=True)
class CanaryKey:
    """What a baseline belongs to: the server, its model, drafter, method and K."""

    server: str
    model: str
    draft: str | None
    method: str | None
    n_spec: int | None

    def id(self) -> str:
        """A stable string key (the store's)."""
        return json.dumps(
            [self.server, self.model, self.draft, self.method, self.n_spec], separators=(",", ":")
        )


def n_spec_of_key(key_id: str) -> int | None:
    """The K of a stored key (`CanaryKey.id()`), None when the key does not say (or is not one:
    its ALs are then held to MAX_AL only)."""
    try:
        parts = loads_bounded(key_id, max_depth=1)
    except JsonError:
        return None
    if not isinstance(parts, list) or len(parts) != 5:
        return None
    k = parts[4]
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 0 else None


def steady_probes(probes: Iterable[float]) -> tuple[float, ...] | None:
    """The probes the baseline is learned from, None while there are none yet: the highest
    group of at least LEARN_PROBES probes within AGREE_SHARE of its highest member, provided no
    probe lies DEGRADED_SHARE or more above the group's mean (the group is then a slow stretch,
    and the engine's real level has not been seen often enough yet)."""
    ordered = sorted(probes, reverse=True)
    if len(ordered) < LEARN_PROBES:
        return None
    for i in range(len(ordered) - LEARN_PROBES + 1):
        head = ordered[i]
        group = tuple(p for p in ordered[i:] if p >= head * (1.0 - AGREE_SHARE))
        if len(group) < LEARN_PROBES:
            continue
        if statistics.fmean(group) < (1.0 - DEGRADED_SHARE) * ordered[0]:
            return None
        return group
    return None


@dataclass(frozen=True, slots=True)
class CanaryBaseline:
    """The learning probes' ALs (the last MAX_LEARNING_PROBES) and the live AL seen meanwhile;
    the baseline proper is their steady group (`steady_probes`)."""

    probes: tuple[float, ...] = ()
    live: tuple[float, ...] = ()

    @property
    def steady(self) -> tuple[float, ...] | None:
        return steady_probes(self.probes)

    @property
    def learned(self) -> bool:
        return self.steady is not None

    @property
    def agreeing(self) -> int:
        """How many probes agree so far (the view's "n/5 probes" while learning)."""
        best = 0
        ordered = sorted(self.probes, reverse=True)
        for i, head in enumerate(ordered):
            best = max(best, sum(1 for p in ordered[i:] if p >= head * (1.0 - AGREE_SHARE)))
        return min(best, LEARN_PROBES) if self.steady is None else len(self.steady)

    @property
    def expected_al(self) -> float | None:
        steady = self.steady
        return statistics.fmean(steady) if steady else None

    @property
    def spread(self) -> float | None:
        """Standard deviation of the steady probes (None before the baseline is learned)."""
        steady = self.steady
        return statistics.stdev(steady) if steady is not None and len(steady) >= 2 else None

    @property
    def tolerance(self) -> float | None:
        """How far below the expected AL a probe may fall before it counts as drifting."""
        expected = self.expected_al
        if expected is None:
            return None
        floor = max(MIN_TOLERANCE_AL, NOISE_SIGMAS * (self.spread or 0.0))
        return min(floor, MAX_TOLERANCE_SHARE * expected)

    @property
    def live_reference(self) -> float | None:
        return statistics.fmean(self.live) if self.live else None

    def with_probe(self, al: float, live_al: float | None) -> CanaryBaseline:
        """The baseline after one more probe. While learning, the probe joins the pool. Once
        learned, it changes nothing (a drifting engine must not teach the baseline its drift)
        unless it lies DEGRADED_SHARE or more above the expected AL: the baseline was then
        learned in a slow stretch, the probe joins the pool and the baseline is learned again."""
        expected = self.expected_al
        if expected is not None and al * (1.0 - DEGRADED_SHARE) <= expected:
            return self
        probes = (*self.probes, al)[-MAX_LEARNING_PROBES:]
        live = self.live
        if live_al is not None:
            live = (*live, live_al)[-MAX_LEARNING_PROBES:]
        return CanaryBaseline(probes, live)

    def problem(self, n_spec: int | None) -> str | None:
        """Why this baseline must not be stored for K = `n_spec` (None: it may be): the store's
        writer asks this, with the rule its loader applies (`al_problem`)."""
        for name, als in (("probes", self.probes), ("live", self.live)):
            for al in als:
                why = al_problem(al, n_spec)
                if why is not None:
                    return f"canary baseline `{name}` holds {why}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"probes": list(self.probes), "live": list(self.live)}

    @classmethod
    def from_json(cls, value: Any, n_spec: int | None = None) -> CanaryBaseline:
        """A baseline from stored JSON for K = `n_spec` (None: unknown); ValueError (one line)
        when it is not one."""
        if not isinstance(value, Mapping):
            raise ValueError("a canary baseline is not an object")
        probes = _als(value.get("probes"), "probes", n_spec)[-MAX_LEARNING_PROBES:]
        live = _als(value.get("live", []), "live", n_spec)[-MAX_LEARNING_PROBES:]
        return cls(probes, live)


def max_al(n_spec: int | None) -> float:
    """The largest possible AL for K = `n_spec`: K + 1 (every draft token accepted, plus the
    target's own token); MAX_AL when K is not known."""
    if n_spec is None or isinstance(n_spec, bool) or n_spec < 0:
        return MAX_AL
    return min(float(n_spec + 1), MAX_AL)


_AL_SLACK = 1e-9
"""Rounding allowed above K + 1 (an AL is a mean of ratios)."""


def al_problem(value: object, n_spec: int | None) -> str | None:
    """Why `value` is not a possible acceptance length for K = `n_spec` (None: it is one).

    The one rule of what the canary keeps: a number from 1 to K + 1 (to MAX_AL when K is not
    known); NaN, infinities, negatives and 1e308 fail it. The store applies it when it reads
    (`from_json`) and before it writes (`problem`), and the probe to the ALs it measures, so a
    value the loader would refuse is never written."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r:.40}, not a number"
    top = max_al(n_spec)
    if not 1.0 <= value <= top + _AL_SLACK:  # NaN fails too
        k = "an unknown K" if n_spec is None else f"K = {n_spec}"
        return f"{value!r:.40}, not an AL for {k} (1 to {top:g})"
    return None


def _als(value: Any, name: str, n_spec: int | None) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise ValueError(f"canary baseline `{name}` is not a list")
    out = []
    for v in value:
        why = al_problem(v, n_spec)
        if why is not None:
            raise ValueError(f"canary baseline `{name}` holds {why}")
        out.append(float(v))
    return tuple(out)


# ---------------------------------------------------------------- the idle gate


@dataclass(frozen=True, slots=True)
class Totals:
    """A server's counters summed over their series (None: not exported)."""

    generation_tokens: float | None = None
    drafts: float | None = None
    accepted: float | None = None


def totals_of(samples: Iterable[MetricSample]) -> Totals:
    sums: dict[str, float] = {}
    wanted = (families.GENERATION_TOKENS, families.SPEC_DRAFTS, families.SPEC_ACCEPTED)
    for s in samples:
        if s.name in wanted and math.isfinite(s.value):
            sums[s.name] = sums.get(s.name, 0.0) + s.value
    return Totals(
        sums.get(families.GENERATION_TOKENS),
        sums.get(families.SPEC_DRAFTS),
        sums.get(families.SPEC_ACCEPTED),
    )


def _grew(before: float | None, after: float | None) -> float | None:
    if before is None or after is None:
        return None
    return counter_increase(before, after)[0]


@dataclass(frozen=True, slots=True)
class LiveTraffic:
    """What live traffic did between the previous probe and now (the canary's own tokens and
    steps taken out when known)."""

    tokens: float | None
    acceptance_length: float | None


def live_since(
    before: Totals | None,
    now: Totals,
    *,
    canary_tokens: int = 0,
    canary_drafts: int = 0,
    canary_accepted: int = 0,
) -> LiveTraffic:
    """Live traffic between two counter readings. Tokens None: unknown (no earlier reading, or
    the counter is not exported); AL None: no live speculative steps."""
    if before is None:
        return LiveTraffic(None, None)
    tokens = _grew(before.generation_tokens, now.generation_tokens)
    if tokens is not None:
        tokens = max(0.0, tokens - canary_tokens)
    drafts = _grew(before.drafts, now.drafts)
    accepted = _grew(before.accepted, now.accepted)
    al = None
    if drafts is not None and accepted is not None:
        d = drafts - canary_drafts
        a = max(0.0, accepted - canary_accepted)
        if d > 0:
            al = 1.0 + a / d
    return LiveTraffic(tokens, al)


def should_probe(
    live: LiveTraffic, *, since_last_s: float | None, interval_s: float
) -> tuple[bool, str]:
    """Whether to probe now, and why not when not: the interval passed and live traffic
    generated tokens since the previous probe (an idle server is left alone)."""
    if since_last_s is not None and since_last_s < interval_s:
        return False, "not due"
    if live.tokens is None:
        return False, "no counter reading yet"
    if live.tokens <= 0:
        return False, "idle: no live traffic since the last probe"
    return True, ""


# ---------------------------------------------------------------- the fold and the view


@dataclass(frozen=True, slots=True)
class CanaryPoint:
    t: float
    acceptance_length: float | None
    live_acceptance_length: float | None
    drifting: bool


@dataclass(frozen=True, slots=True)
class CanaryView:
    """The canary of one server, for the app, `watch --json` and replay (docs/canary.md)."""

    source: str
    status: CanaryStatus
    diagnosis: CanaryDiagnosis
    probes: int
    """Probes that reached the server this session (failed ones included)."""
    learned_probes: int
    learn_probes: int
    acceptance_length: float | None
    """The latest probe's AL."""
    expected_al: float | None
    tolerance: float | None
    deviation: float | None
    """Latest AL - expected AL (negative: below)."""
    live_acceptance_length: float | None
    """Live traffic's AL between the last two probes (from /metrics), canary excluded."""
    live_reference: float | None
    """Live AL while the baseline was learned."""
    consecutive_drift: int
    advice: str | None
    """One line when there is something to do (restart), else None."""
    error: str | None
    history: tuple[CanaryPoint, ...] = ()


def judged_tolerance(expected_al: float | None, tolerance: float | None) -> float | None:
    """The tolerance a probe is judged with: the one its event carries, at most
    MAX_TOLERANCE_SHARE of the expected AL. A live probe's is already within it; a recording made
    by an older specmon may carry a wider one (3 standard deviations of probes that did not agree:
    3.6 around an expected 2.3), under which a probe at AL 1.0 on a degraded engine read "ok"."""
    if expected_al is None or tolerance is None:
        return None
    return min(tolerance, MAX_TOLERANCE_SHARE * expected_al)


def _judge(event: CanaryProbed, streak: int) -> tuple[CanaryStatus, CanaryDiagnosis, int]:
    if event.outcome != "ok" or event.acceptance_length is None:
        return "failed", "unknown", streak
    tolerance = judged_tolerance(event.expected_al, event.tolerance)
    if event.expected_al is None or tolerance is None:
        return "learning", "learning", 0
    if event.acceptance_length < event.expected_al - tolerance:
        streak += 1
        if streak >= CONFIRM_PROBES:
            return "drifted", "engine_drift", streak
        return "drifting", "steady", streak
    live, ref = event.live_acceptance_length, event.live_reference
    if live is not None and ref is not None and ref > 0 and abs(live - ref) / ref > WORKLOAD_SHIFT:
        return "ok", "workload_change", 0
    return "ok", "steady", 0


def advice_for(view_al: float, expected: float, tolerance: float, streak: int) -> str:
    return (
        f"canary AL {view_al:.2f} vs {expected:.2f} expected (noise ±{tolerance:.2f}) on "
        f"{streak} probes in a row: the engine drifted, not the workload; restart the server"
    )


@dataclass(slots=True)
class CanaryTracker:
    """Folds CanaryProbed events into one CanaryView per server (bounded history)."""

    _views: dict[str, CanaryView] = field(default_factory=dict)
    _history: dict[str, deque[CanaryPoint]] = field(default_factory=dict)

    def apply(self, event: CanaryProbed) -> None:
        prev = self._views.get(event.source)
        streak = prev.consecutive_drift if prev is not None else 0
        status, diagnosis, streak = _judge(event, streak)
        if status == "failed" and prev is not None:
            # a failed probe says nothing about drift: keep the last judgement, note the error
            self._views[event.source] = replace(
                prev, probes=prev.probes + 1, status="failed", error=event.error
            )
            return
        hist = self._history.setdefault(event.source, deque(maxlen=HISTORY))
        hist.append(
            CanaryPoint(
                event.t,
                event.acceptance_length,
                event.live_acceptance_length,
                status in ("drifting", "drifted"),
            )
        )
        al, expected = event.acceptance_length, event.expected_al
        tol = judged_tolerance(expected, event.tolerance)
        deviation = al - expected if al is not None and expected is not None else None
        advice = None
        if status == "drifted" and al is not None and expected is not None and tol is not None:
            advice = advice_for(al, expected, tol, streak)
        self._views[event.source] = CanaryView(
            source=event.source,
            status=status,
            diagnosis=diagnosis,
            probes=(prev.probes if prev else 0) + 1,
            learned_probes=event.learned_probes,
            learn_probes=LEARN_PROBES,
            acceptance_length=al,
            expected_al=expected,
            tolerance=tol,
            deviation=deviation,
            live_acceptance_length=event.live_acceptance_length,
            live_reference=event.live_reference,
            consecutive_drift=streak,
            advice=advice,
            error=event.error,
            history=tuple(hist),
        )

    def views(self) -> tuple[CanaryView, ...]:
        return tuple(self._views[k] for k in sorted(self._views))


def canary_json(view: CanaryView) -> dict[str, Any]:
    """The view as `watch --json` writes it (docs/watch-json.md)."""
    return {
        "source": view.source,
        "status": view.status,
        "diagnosis": view.diagnosis,
        "probes": view.probes,
        "learned_probes": view.learned_probes,
        "learn_probes": view.learn_probes,
        "acceptance_length": view.acceptance_length,
        "expected_acceptance_length": view.expected_al,
        "tolerance": view.tolerance,
        "deviation": view.deviation,
        "live_acceptance_length": view.live_acceptance_length,
        "live_reference": view.live_reference,
        "consecutive_drift": view.consecutive_drift,
        "advice": view.advice,
        "error": view.error,
    }
