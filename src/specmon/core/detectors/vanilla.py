"""The vanilla-speed flag: did speculation actually help this request, and if not, why.

A request is flagged when
- its decode speed is at or below the vanilla baseline plus a margin (one-sided: slower than
  vanilla is the worst case, not a different one), or
- its acceptance length stays near 1.0 while drafts are proposed, or
- speculation is not configured on its server (every request runs at vanilla speed).

Each reason is decided on its own inputs (so each can be triggered alone):
- acceptance_near_zero: AL ≤ 1 + max(al_near_one, rate_near_zero·K) while drafts are proposed
  (server-side per-request drafts > 0, or the server is known to run speculation), i.e. AL near
  1.0, or a draft acceptance rate (AL - 1)/K of at most 5% when K is known (at K = 15 an AL of 1.5
  means 3% of drafts accepted: the drafter is not working); judged from the server's per-request
  numbers when present, else from at least `min_decode_chunks` client decode chunks.
- net_loss: AL > 1 + al_near_one but decode speed ≤ baseline·(1 + margin), and no throttling or
  contention explains it (the verify cost eats the gain).
- throttling: a GPU reading during the request shows a thermal/power clock-event reason, or a
  temperature at or above its slowdown threshold.
- batch_contention: other requests overlapped this one (in this session, or
  vllm:num_requests_running > 1 during it).
- spec_not_configured: no vllm:spec_decode_* family on the server, or n_spec = 0.
- short_request: fewer than `min_tokens` completion tokens: too few to judge speed (prefill and the
  first step dominate); set instead of net_loss.
- vanilla_speed: slow, and none of the above explains it (e.g. AL unknown).
Without a baseline only the AL-based and configuration reasons apply. Pure: inputs in, verdict out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from specmon.core.events import GpuReading
from specmon.core.gpu_reasons import SLOWDOWN_REASONS
from specmon.core.stream_stats import RequestStats

THROTTLE_REASONS: frozenset[str] = SLOWDOWN_REASONS
"""Decoded clock-event reasons (core.gpu_reasons words) that slow a GPU down: thermal, power and
hardware slowdowns. gpu_idle, applications_clocks_setting, sync_boost and display_clock_setting do
not mean throttling."""

DEFAULT_MARGIN = 0.10
DEFAULT_AL_NEAR_ONE = 0.10
DEFAULT_RATE_NEAR_ZERO = 0.05
DEFAULT_MIN_TOKENS = 32
DEFAULT_MIN_DECODE_CHUNKS = 4


@dataclass(frozen=True, slots=True)
class VanillaContext:
    """What is known around a request besides its own stream."""

    baseline_tok_s: float | None = None
    """Vanilla (n_spec = 0) decode tok/s for this model + GPU + vLLM version; None = unknown."""
    spec_configured: bool | None = None
    """False: no spec-decode metrics on the server; None: not known."""
    n_spec: int | None = None
    gpu_readings: tuple[GpuReading, ...] = ()
    """GPU readings sampled between send and end of the request."""
    overlapping_requests: int = 0
    """Other requests of this session in flight at some point during this one."""
    server_running_max: float | None = None
    """Largest vllm:num_requests_running seen during the request (summed over engines)."""
    margin: float = DEFAULT_MARGIN
    al_near_one: float = DEFAULT_AL_NEAR_ONE
    rate_near_zero: float = DEFAULT_RATE_NEAR_ZERO
    """Draft acceptance rate (AL - 1)/K at or below which acceptance counts as near 0."""
    min_tokens: int = DEFAULT_MIN_TOKENS
    min_decode_chunks: int = DEFAULT_MIN_DECODE_CHUNKS


@dataclass(frozen=True, slots=True)
class VanillaVerdict:
    """flagged: the request ran at (or below) vanilla speed; reasons: (code, sentence) pairs."""

    flagged: bool
    reasons: tuple[tuple[str, str], ...] = ()
    judged: bool = True
    """False for requests that did not finish normally (failed, cancelled, running)."""

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(code for code, _ in self.reasons)


def throttle_evidence(readings: Iterable[GpuReading]) -> str | None:
    """A sentence naming the throttling seen in the readings, or None."""
    reasons: set[str] = set()
    hot: list[str] = []
    for r in readings:
        if r.clock_event_reasons:
            reasons.update(x for x in r.clock_event_reasons if x in THROTTLE_REASONS)
        if (
            r.temperature_c is not None
            and r.slowdown_temperature_c is not None
            and r.temperature_c >= r.slowdown_temperature_c
        ):
            hot.append(f"GPU {r.index} at {r.temperature_c:g} °C ≥ {r.slowdown_temperature_c:g} °C")
    parts = []
    if reasons:
        parts.append("clock-event reasons " + ", ".join(sorted(reasons)))
    if hot:
        parts.append(hot[0])
    return "; ".join(parts) if parts else None


Reason = tuple[str, str]
"""(code, sentence) of one reason a request was flagged."""


@dataclass(frozen=True, slots=True)
class _Findings:
    """What the verdict is decided from, each finding on its own inputs."""

    al: float | None
    """The acceptance length judged by: the server's per-request one, else the client's."""
    near_one_limit: float
    """AL at or below which acceptance counts as near 0."""
    not_configured: bool
    near_one: bool
    slow: bool
    """Decode speed at or below the baseline plus the margin (False without a baseline)."""
    throttle: str | None
    """Throttling seen during the request; only looked for when the request is slow or near one."""
    contention: bool
    short: bool


def judge(stats: RequestStats, ctx: VanillaContext) -> VanillaVerdict:
    """The vanilla-speed verdict of one finished request."""
    if stats.outcome != "ok":
        return VanillaVerdict(flagged=False, judged=False)
    found = _findings(stats, ctx)
    if not (found.not_configured or found.near_one or found.slow):
        return VanillaVerdict(flagged=False)
    reasons = tuple(r for rule in _REASONS if (r := rule(stats, ctx, found)) is not None)
    return VanillaVerdict(flagged=True, reasons=reasons or (_vanilla_speed(stats, ctx),))


def _findings(stats: RequestStats, ctx: VanillaContext) -> _Findings:
    not_configured = ctx.spec_configured is False or ctx.n_spec == 0
    al, server_drafted = _acceptance(stats)
    limit = _near_one_limit(ctx)
    near_one = (
        not not_configured
        and al is not None
        and _drafts_proposed(stats, ctx, server_drafted)
        and al <= limit
    )
    slow = _slow(stats, ctx)
    return _Findings(
        al=al,
        near_one_limit=limit,
        not_configured=not_configured,
        near_one=near_one,
        slow=slow,
        throttle=throttle_evidence(ctx.gpu_readings) if slow or near_one else None,
        contention=_others(ctx) > 0 or _running_several(ctx),
        short=stats.completion_tokens is not None and stats.completion_tokens < ctx.min_tokens,
    )


def _acceptance(stats: RequestStats) -> tuple[float | None, bool]:
    """(AL to judge by, whether drafts were seen being proposed by the server for this request)."""
    server = stats.server_spec
    if server is not None and server.num_draft_tokens is not None:
        return server.mean_acceptance_length, server.num_draft_tokens > 0
    return stats.client_acceptance_length, False


def _near_one_limit(ctx: VanillaContext) -> float:
    """1 + al_near_one, or 1 + rate_near_zero·K when K is known and that is larger."""
    limit = 1.0 + ctx.al_near_one
    if ctx.n_spec is not None and ctx.n_spec > 0:
        limit = max(limit, 1.0 + ctx.rate_near_zero * ctx.n_spec)
    return limit


def _drafts_proposed(stats: RequestStats, ctx: VanillaContext, server_drafted: bool) -> bool:
    """The server's per-request numbers show drafts, or the server runs speculation and enough
    client decode chunks were seen to judge AL from them."""
    enough_client = stats.decode_chunks >= ctx.min_decode_chunks
    return server_drafted or (ctx.spec_configured is True and enough_client)


def _slow(stats: RequestStats, ctx: VanillaContext) -> bool:
    threshold = _threshold(ctx)
    return (
        threshold is not None and stats.decode_tok_s is not None and stats.decode_tok_s <= threshold
    )


def _threshold(ctx: VanillaContext) -> float | None:
    """Vanilla baseline · (1 + margin), or None without a (positive) baseline."""
    if ctx.baseline_tok_s is None or ctx.baseline_tok_s <= 0:
        return None
    return ctx.baseline_tok_s * (1.0 + ctx.margin)


def _others(ctx: VanillaContext) -> int:
    return max(ctx.overlapping_requests, 0)


def _running_several(ctx: VanillaContext) -> bool:
    return ctx.server_running_max is not None and ctx.server_running_max > 1


# --------------------------------------------------------------- one function per reason


def _spec_not_configured(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    if not f.not_configured:
        return None
    return (
        "spec_not_configured",
        "speculation is not configured on this server (no spec-decode metrics or n_spec 0)",
    )


def _acceptance_near_zero(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    if not f.near_one or f.al is None:
        return None
    per_step = (
        f" ({(f.al - 1.0) / ctx.n_spec:.0%} of {ctx.n_spec} drafts accepted per step)"
        if ctx.n_spec
        else ""
    )
    return (
        "acceptance_near_zero",
        f"acceptance near 0: acceptance length {f.al:.2f} while drafts are proposed{per_step}",
    )


def _throttling(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    if not f.throttle:
        return None
    return ("throttling", f"GPU throttling during the request: {f.throttle}")


def _batch_contention(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    if not (f.contention and (f.slow or f.near_one)):
        return None
    others = _others(ctx)
    what = (
        f"{others} other request(s) of this session overlapped"
        if others > 0
        else f"the server ran up to {ctx.server_running_max:g} requests at once"
    )
    return ("batch_contention", f"batch contention: {what}")


def _short_request(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    if not (f.slow and f.short):
        return None
    limit = f" (max_tokens {stats.max_tokens})" if stats.max_tokens is not None else ""
    return (
        "short_request",
        f"only {stats.completion_tokens} tokens{limit}: too few to judge decode speed",
    )


def _net_loss(stats: RequestStats, ctx: VanillaContext, f: _Findings) -> Reason | None:
    """AL above near-one but slow, and nothing else (throttling, contention, shortness,
    configuration) explains it: the verify cost eats the gain."""
    explained = f.not_configured or f.throttle or f.contention or f.short
    if not f.slow or explained or f.al is None or f.al <= f.near_one_limit:
        return None
    return (
        "net_loss",
        f"net loss: acceptance length {f.al:.2f} but {stats.decode_tok_s:.1f} tok/s is at "
        f"or below vanilla {ctx.baseline_tok_s:.1f} tok/s + {ctx.margin:.0%} "
        "(verify cost eats the gain)",
    )


def _vanilla_speed(stats: RequestStats, ctx: VanillaContext) -> Reason:
    """Slow, and no reason above explains it (e.g. AL unknown)."""
    return (
        "vanilla_speed",
        f"decode {stats.decode_tok_s:.1f} tok/s at or below vanilla "
        f"{ctx.baseline_tok_s:.1f} tok/s + {ctx.margin:.0%}; no cause found",
    )


_REASONS: tuple[Callable[[RequestStats, VanillaContext, _Findings], Reason | None], ...] = (
    _spec_not_configured,
    _acceptance_near_zero,
    _throttling,
    _batch_contention,
    _short_request,
    _net_loss,
)
"""The reasons in the order a verdict lists them."""
