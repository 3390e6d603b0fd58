"""The events that flow from sources through the hub to the session state, the recorder and the UI.

Every event carries `t`: seconds on the monotonic clock, taken when the observation ARRIVED (before
any other work). Events hold raw observations only; derived numbers (acceptance length, rates,
flags) are computed from them in core, so replaying a recording recomputes everything and an
improved detector also improves old recordings.

`source` names where an event came from: the server's base URL for stream, /metrics and log events,
`"gpu"` or a dcgm-exporter URL for GPU samples.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Labels = tuple[tuple[str, str], ...]
"""Prometheus labels as sorted (name, value) pairs: hashable and order-independent."""


def labels_of(mapping: dict[str, str]) -> Labels:
    """Labels from a dict, sorted by name so equal label sets compare equal."""
    return tuple(sorted(mapping.items()))


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What is known of the session's server when it starts (the recording header)."""

    server: str | None = None
    model: str | None = None
    draft_model: str | None = None
    method: str | None = None
    n_spec: int | None = None
    vllm_version: str | None = None
    gpu: str | None = None
    simulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- requests (stream client)


@dataclass(frozen=True, slots=True)
class RequestStarted:
    """A chat/completions request was sent (t = send time)."""

    t: float
    request_id: str
    source: str
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    prompt_chars: int = 0
    """Length of the prompt text; the prompt itself is not kept in events."""


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One SSE data message of a streamed response, as it arrived.

    `completion_tokens` is the CUMULATIVE `usage.completion_tokens` that vLLM attaches to every
    chunk when `continuous_usage_stats` is on (None when the server did not send it). The tokens a
    chunk carried are the difference to the previous chunk's value; core computes that.
    """

    t: float
    request_id: str
    text: str = ""
    reasoning: str = ""
    role: str | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None


RequestOutcome = Literal["ok", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class RequestEnded:
    """The stream finished (t = arrival of the last data message, normally the usage chunk).

    `spec_decoding` is vLLM's per-request `metrics.speculative_decoding` object when the server
    returned one. On failure `error` says what went wrong; what arrived before stays in the
    preceding `StreamChunk` events.
    """

    t: float
    request_id: str
    outcome: RequestOutcome = "ok"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    spec_decoding: dict[str, Any] | None = None
    error: str | None = None
    server_timing: dict[str, Any] | None = None
    """vLLM's per-request timing fields (`--enable-per-request-metrics`: queue_time_ms,
    time_to_first_token_ms, ...; core.server_timing) when the server returned them."""
    dropped_turns: int = 0
    """The oldest conversation turns (a question and its answer each) this request was resent
    without, after the server said its context was too long (HTTP 400): one request, whose
    refused attempts are not events of their own (runtime.prompt_loop)."""


# ---------------------------------------------------------------- server (/metrics, logs, health)


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One Prometheus sample of a family specmon reads (exact exported name, e.g. `..._total`)."""

    name: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class MetricsScraped:
    """A successful /metrics scrape: every sample of the families specmon reads."""

    t: float
    source: str
    samples: tuple[MetricSample, ...]


ServerStatus = Literal["up", "stale", "down", "unreadable", "removed"]
"""A server's state; "removed": the user stopped watching it (its numbers leave the view)."""


@dataclass(frozen=True, slots=True)
class ServerStatusChanged:
    """The reachability of a server's /metrics changed (up, stale, down, or unreadable page)."""

    t: float
    source: str
    status: ServerStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ServerLogLine:
    """One line that a hosted `vllm serve` printed (untrusted text: display literally)."""

    t: float
    source: str
    line: str


# ---------------------------------------------------------------- GPU


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant. Every number is None when not available (shown as —, never 0)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    temperature_c: float | None = None
    slowdown_temperature_c: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_pct: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    """The enforced (effective) power limit."""
    power_limit_requested_w: float | None = None
    """The power limit set (requested) by the administrator; may differ from the enforced one."""
    power_limit_default_w: float | None = None
    """The board's default power limit."""
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    """Decoded clock-event (throttle) reasons, e.g. ("sw_power_cap",); () when none is active."""
    host: str | None = None
    """The GPU's host when read remotely (dcgm-exporter's `hostname` label); None locally."""


@dataclass(frozen=True, slots=True)
class GpuSampled:
    """One sample of every GPU the sampler sees. `error` says why there is no reading."""

    t: float
    source: str
    gpus: tuple[GpuReading, ...]
    error: str | None = None


# ---------------------------------------------------------------- fleet (a Prometheus)


@dataclass(frozen=True, slots=True)
class FleetTarget:
    """One vLLM target as a Prometheus sees it at one instant: its query results, unprocessed.

    `instance` and `job` are the target's labels in the Prometheus. Rates are PromQL `rate()`
    over the read's window, summed over engines (per second); the counters' absolute values are
    the latest samples, summed over engines. A series the Prometheus does not have is None.
    Acceptance length and the other ratios are computed from these in core (core.fleet_state).
    """

    instance: str
    job: str
    health: str = "unknown"
    """The Prometheus's own scrape health of the target: "up", "down" or "unknown"."""
    url: str | None = None
    """Where the Prometheus scrapes it (the target's scrape URL), when known."""
    last_error: str = ""
    """The Prometheus's last scrape error for this target (untrusted text: display literally)."""
    generation_tok_s: float | None = None
    drafts_per_s: float | None = None
    draft_tokens_per_s: float | None = None
    accepted_per_s: float | None = None
    accepted_per_pos_per_s: tuple[float, ...] | None = None
    """Index i = rate of the per-position counter with `position="i"`."""
    generation_tokens: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_pos: tuple[float, ...] | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage_frac: float | None = None
    gpus: tuple[GpuReading, ...] = ()
    """dcgm-exporter series of the target's host, when the Prometheus has them."""


@dataclass(frozen=True, slots=True)
class FleetHistory:
    """One target's history from a Prometheus range query (oldest first, parallel tuples).

    `ago_s` is how long before the event's `t` each point was (non-negative), so the history sits
    on the session's own clock; the other tuples are rates and gauges at those points.
    """

    instance: str
    job: str
    step_s: float
    ago_s: tuple[float, ...]
    generation_tok_s: tuple[float | None, ...]
    accepted_per_s: tuple[float | None, ...]
    drafts_per_s: tuple[float | None, ...]
    requests_running: tuple[float | None, ...]
    kv_cache_usage_frac: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class FleetSampled:
    """One read of a Prometheus (`source`: its URL): every vLLM target it scrapes, and the
    history of some of them. `error` says why the read failed (then `targets` is empty and the
    targets seen before are kept, marked stale)."""

    t: float
    source: str
    rate_window_s: float
    targets: tuple[FleetTarget, ...]
    history: tuple[FleetHistory, ...] = ()
    error: str | None = None


# ---------------------------------------------------------------- user


@dataclass(frozen=True, slots=True)
class Marker:
    """A user (or tool) marker on the timeline."""

    t: float
    label: str


@dataclass(frozen=True, slots=True)
class CanaryProbed:
    """One canary probe of a server (core.canary): its AL and the baseline it was judged by.

    The baseline's numbers (expected AL, tolerance, learned probes, live reference) are those in
    force when the probe ran, so a recording replays the same judgement without the store.
    `expected_al`/`tolerance` are None while the baseline is being learned.
    """

    t: float
    source: str
    outcome: RequestOutcome = "ok"
    acceptance_length: float | None = None
    completion_tokens: int | None = None
    expected_al: float | None = None
    tolerance: float | None = None
    learned_probes: int = 0
    live_acceptance_length: float | None = None
    live_reference: float | None = None
    error: str | None = None


Event = (
    RequestStarted
    | StreamChunk
    | RequestEnded
    | MetricsScraped
    | ServerStatusChanged
    | ServerLogLine
    | GpuSampled
    | Marker
    | FleetSampled
    | CanaryProbed
)

Emit = Callable[[Event], None]
"""Where a source hands its events (the hub's `emit`, called on the hub thread)."""

GpuEmit = Callable[[GpuSampled], Awaitable[None] | None]
"""Where the GPU sampling loop hands its samples: a plain function or a coroutine function."""
