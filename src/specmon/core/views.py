"""The typed read model: frozen views of a session that the UI and `watch --json` read.

A `SessionView` is built by the session state (core.session_state) from its fold of events and
published as one immutable object (core.publish.ViewPublisher): a reader never sees a half-built
state and never holds the hub's lock while one is built. Widgets read these fields only; no
string keys, no I/O.

Conventions:
- every number that is displayed is a field whose name carries its unit (`decode_tok_s`,
  `ttft_s`, `kv_cache_usage_frac`, `memory_used_bytes`); a number that is not known is None
  (shown "—", never 0); non-finite values never reach a view.
- where several sources give the same number (a request's acceptance: the server's per-request
  object, the stream's chunk sizes, /metrics deltas), each source's own value is kept in an
  `Acceptance` labelled with its source, and the chosen one is exposed beside them
  (`choose_acceptance`: server first, chunks second, /metrics third — docs/definitions.md).
- window numbers (the last N seconds of counter deltas) and since-start numbers (the counters'
  absolute values: since the server started, or since its last counter reset) are two separate,
  clearly named groups of a server view, so nobody mistakes one for the other.
- time series are tuples (oldest first), one tuple per quantity, all of the same length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specmon.core.canary import CanaryView
from specmon.core.diagnosis.state import DiagnosisView
from specmon.core.events import GpuReading, ServerStatus, SessionInfo
from specmon.core.fleet_views import FleetTargetInfo, ServerOrigin
from specmon.core.server_timing import TtftSplit

AcceptanceSource = Literal["server", "chunks", "metrics"]
"""Where a request's acceptance numbers came from:
- "server": vLLM's own per-request `metrics.speculative_decoding` (exact under any concurrency);
- "chunks": tokens per stream chunk with continuous usage stats (client side);
- "metrics": /metrics counter deltas around the request (exact only when it ran alone)."""

MarkerKind = Literal["user", "counter_reset", "status"]
RequestOutcomeView = Literal["ok", "failed", "cancelled", "running"]


@dataclass(frozen=True, slots=True)
class Acceptance:
    """A request's acceptance numbers from ONE source.

    acceptance_length: mean tokens per speculative step, bonus token included (1 + accepted/steps);
    draft_acceptance_rate: accepted draft tokens / draft tokens, 0..1;
    per_position_rates: index i = share of steps whose first i+1 drafts were all accepted.
    """

    source: AcceptanceSource
    acceptance_length: float | None
    draft_acceptance_rate: float | None = None
    per_position_rates: tuple[float, ...] | None = None


def choose_acceptance(
    server: Acceptance | None, chunks: Acceptance | None, metrics: Acceptance | None
) -> Acceptance | None:
    """The acceptance to show for a request: the first source (server, chunks, /metrics) that has
    an acceptance length. This is a measurement rule, so it lives in core, not in a widget."""
    for candidate in (server, chunks, metrics):
        if candidate is not None and candidate.acceptance_length is not None:
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class SpecSteps:
    """The server's per-step record of one request (`detailed` per-request metrics).

    Step j accepted `accepted[j]` drafts and so produced `accepted[j] + 1` tokens. Stored as
    bytes (each entry a small int, 0..255) to keep 500 rows small; `kept` ≤ `total` steps (the
    first `kept` steps are kept when a request had more than the per-row bound).
    """

    accepted: bytes
    drafted: bytes | None
    total: int

    @property
    def kept(self) -> int:
        return len(self.accepted)


@dataclass(frozen=True, slots=True)
class VanillaView:
    """The vanilla-speed verdict of a request: flagged, whether it was judged, and the reasons as
    (code, sentence) pairs (codes in docs/definitions.md)."""

    flagged: bool
    judged: bool
    reasons: tuple[tuple[str, str], ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(code for code, _ in self.reasons)


SpeedClassKind = Literal["ok", "transition", "vanilla-speed"]


@dataclass(frozen=True, slots=True)
class SpeedClassView:
    """A finished ok request's speed class (detectors.speed_class): ok, transition (between the
    session's recent fast and slow levels) or vanilla-speed (flagged by the vanilla verdict, or at
    the recent slow level), with the reasons as (code, sentence) pairs and the levels used."""

    kind: SpeedClassKind
    reasons: tuple[tuple[str, str], ...] = ()
    fast_level_tok_s: float | None = None
    slow_level_tok_s: float | None = None


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One request (finished, or in flight with outcome "running")."""

    request_id: str
    source: str
    model: str | None
    outcome: RequestOutcomeView
    error: str | None
    t_send: float | None
    t_end: float | None
    temperature: float | None
    max_tokens: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    ttft_s: float | None
    e2el_s: float | None
    tpot_s: float | None
    decode_tok_s: float | None
    e2e_tok_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    chunks: int
    decode_chunks: int
    merged_chunks: int | None
    single_token_chunks: int
    acceptance: Acceptance | None
    """The chosen acceptance (choose_acceptance of the three below)."""
    acceptance_server: Acceptance | None
    acceptance_chunks: Acceptance | None
    acceptance_metrics: Acceptance | None
    spec_steps: SpecSteps | None
    """The server's per-step accepted counts, when it returned them (bounded)."""
    spec_decoding_note: str | None
    """Why the server's per-request object was ignored (malformed, inconsistent, too large)."""
    overlapping_requests: int
    vanilla: VanillaView | None
    """None while running; judged=False for failed/cancelled requests."""
    speed_class: SpeedClassView | None = None
    """ok / transition / vanilla-speed against the session's recent speeds; None while running,
    for failed/cancelled requests and for rows without a decode speed."""
    ttft_split: TtftSplit | None = None
    """The TTFT split into the engine's share (queue + server TTFT, from vLLM's per-request
    timing metrics) and the rest (network, API server, client); None when the server sent no
    timings (core.server_timing)."""
    quality: Literal["loop", "garbled"] | None = None
    """The quality sentinel's flag on the answer (core.diagnosis.quality), judged before speed:
    a flagged answer sets no speed level and is left out of the cycle."""
    quality_evidence: str = ""
    settled: bool = True
    """False while an ok row's speed class waits for the session's speed levels (it is judged
    again when they appear, or settled as not flagged when it leaves their window)."""
    partial: bool = False
    """Recorded in part (the recording began in the middle of the answer): its speeds are those
    of the recorded part."""


@dataclass(frozen=True, slots=True)
class PercentileView:
    """p50, p95, p99 of one quantity (numpy's linear interpolation); None when empty."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


@dataclass(frozen=True, slots=True)
class PercentilesView:
    ttft_s: PercentileView
    tpot_s: PercentileView
    e2el_s: PercentileView
    decode_tok_s: PercentileView
    itl_s: PercentileView


@dataclass(frozen=True, slots=True)
class SummaryView:
    """Counts over ALL finished requests (also rows no longer kept); means over ok requests."""

    total: int
    ok: int
    failed: int
    cancelled: int
    flagged: int
    rows_kept: int
    rows_dropped: int
    lost_in_flight: int
    mean_decode_tok_s: float | None
    mean_e2e_tok_s: float | None
    mean_ttft_s: float | None
    mean_client_acceptance_length: float | None
    vanilla_speed: int = 0
    """Verdicts over ALL finished requests (core.verdict), as the rows' badges say now: the
    panel, the timeline, the answers table, the JSON and the exporter count these."""
    transition: int = 0
    loop: int = 0
    garbled: int = 0


@dataclass(frozen=True, slots=True)
class WindowNumbers:
    """Numbers over the last `window_seconds` of counter deltas (server-wide)."""

    window_seconds: float | None
    """The span actually covered (None before two scrapes)."""
    decode_tok_s: float | None
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position_rates: tuple[float, ...] | None
    latency: HistogramLatency | None = None
    """TTFT and ITL percentiles from the server's own histograms over the window (None before
    two scrapes, or when the page has no buckets)."""


@dataclass(frozen=True, slots=True)
class HistogramLatency:
    """TTFT and ITL percentiles from the window's increase of the server's histogram buckets
    (`vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds`: per engine step
    under speculative decoding), as Grafana's histogram_quantile computes them; with how many
    observations each holds (0: nothing measured in the window)."""

    ttft_s: PercentileView
    itl_s: PercentileView
    ttft_count: float
    itl_count: float


@dataclass(frozen=True, slots=True)
class LifetimeNumbers:
    """Since-start numbers from the counters' ABSOLUTE values on the latest scrape: since the
    server started, or since its last counter reset when one was seen (`since_reset_t`).

    Garbage absolute values (negative, non-finite, accepted above drafted, a position above the
    drafts) give None with a `note`, never wrong numbers.
    """

    since_reset_t: float | None
    """When the last counter reset was seen (None: since the server started)."""
    generation_tokens: float | None
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position_rates: tuple[float, ...] | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class SessionTotals:
    """Reset-corrected increases since this session's first scrape (None: family absent)."""

    generation_tokens: float | None
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None


@dataclass(frozen=True, slots=True)
class ResetView:
    """A counter series that went down (the server restarted)."""

    t: float
    series: str
    labels: tuple[tuple[str, str], ...]
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class ServerHistory:
    """One entry per scrape (oldest first): parallel tuples of the same length.

    The one history of a server's numbers: the graphs and `watch --json` both read it (window
    numbers over the state's window, since-start numbers from the counters' absolute values, as
    in `WindowNumbers` and `LifetimeNumbers` at that scrape)."""

    t: tuple[float, ...]
    decode_tok_s: tuple[float | None, ...]
    acceptance_length: tuple[float | None, ...]
    requests_running: tuple[float | None, ...]
    kv_cache_usage_frac: tuple[float | None, ...]
    draft_acceptance_rate: tuple[float | None, ...]
    acceptance_length_lifetime: tuple[float | None, ...]
    draft_acceptance_rate_lifetime: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class SpecLogView:
    """The last `SpecDecoding metrics` log line of a hosted server."""

    t: float | None
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    accepted_tokens: int | None
    drafted_tokens: int | None
    per_position_rates: tuple[float, ...] | None
    format: str


@dataclass(frozen=True, slots=True)
class EngineLogView:
    """The last `Engine 000` log line of a hosted server."""

    t: float | None
    engine: int | None
    prompt_tok_s: float | None
    generation_tok_s: float | None
    running: int | None
    waiting: int | None
    kv_cache_usage_frac: float | None
    prefix_cache_hit_rate: float | None
    format: str


@dataclass(frozen=True, slots=True)
class LogView:
    lines: int
    tail: tuple[str, ...]
    """Untrusted text: display literally."""
    spec_decoding: SpecLogView | None
    engine: EngineLogView | None


@dataclass(frozen=True, slots=True)
class EngineView:
    """One engine (data-parallel rank, the `engine` label of vLLM's metrics) of a server: its
    share of the server's window numbers, from the same counter deltas filtered to its series,
    and its own gauges. The server's numbers are these summed (tok/s, running, waiting) or
    pooled (AL and rates: the engines' deltas added before dividing)."""

    engine: str
    decode_tok_s: float | None
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage_frac: float | None


@dataclass(frozen=True, slots=True)
class ServerView:
    """One attached server."""

    source: str
    status: ServerStatus | None
    status_detail: str
    status_since: float | None
    last_scrape_t: float | None
    spec_configured: bool | None
    n_spec: int | None
    engines: tuple[str, ...]
    window: WindowNumbers
    lifetime: LifetimeNumbers | None
    """None before the first scrape."""
    v0_draft_acceptance_rate: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage_frac: float | None
    totals: SessionTotals
    counter_resets: int
    recent_resets: tuple[ResetView, ...]
    history: ServerHistory
    log: LogView
    origin: ServerOrigin = "metrics"
    """"metrics": specmon scrapes the server's /metrics; "prometheus": read through a Prometheus
    (core.fleet_state), then `fleet` says which and `per_request_note` why there is no
    per-request acceptance."""
    per_request_note: str | None = None
    fleet: FleetTargetInfo | None = None
    engine_numbers: tuple[EngineView, ...] = ()
    """One entry per engine label seen on the latest scrape (sorted), window numbers; empty
    before the first scrape or when the page carries no `engine` label."""
    model: str | None = None
    vllm_version: str | None = None
    """What this server said of itself (/v1/models, /version; core.server_identities), each
    server its own: not the session's first server's."""
    gauge_note: str | None = None
    """Why gauges are None although the server sent them: outside their range (a KV usage
    above 1, a negative request count; core.gauge_ranges); None when every gauge is a reading."""


@dataclass(frozen=True, slots=True)
class GpuHistory:
    """One GPU's readings over time (oldest first): parallel tuples of the same length."""

    index: int
    t: tuple[float, ...]
    temperature_c: tuple[float | None, ...]
    power_w: tuple[float | None, ...]
    sm_clock_mhz: tuple[float | None, ...]
    memory_used_bytes: tuple[int | None, ...]
    utilization_pct: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class GpuView:
    """The latest GPU sample (every reading's numbers are None when unavailable) and history."""

    source: str | None
    t: float | None
    error: str | None
    gpus: tuple[GpuReading, ...]
    history: tuple[GpuHistory, ...]


@dataclass(frozen=True, slots=True)
class MarkerView:
    t: float
    kind: MarkerKind
    label: str


@dataclass(frozen=True, slots=True)
class CycleView:
    """Periodic degradation over the last ok requests' decode speeds (detectors.cycle).

    The fields after `detected` are None when no cycle was detected."""

    requests: int
    long_run_mean_tok_s: float | None
    detected: bool
    period: int | None = None
    cycles: int | None = None
    transitions_per_cycle: float | None = None
    degraded_per_cycle: float | None = None
    recoveries_per_cycle: float | None = None
    fast_per_cycle: float | None = None
    fast_mean_tok_s: float | None = None
    degraded_mean_tok_s: float | None = None
    share_degraded: float | None = None
    long_run_over_peak: float | None = None
    period_min: int | None = None
    """Shortest spacing (requests) between the starts of consecutive degradation episodes."""
    period_max: int | None = None
    """Longest spacing; equal to period_min when the cycle is exactly periodic."""
    period_mean: float | None = None
    episodes: int | None = None
    """Degradation episodes of the cycle seen (stray one-off dips left out)."""
    stray_episodes: int | None = None


@dataclass(frozen=True, slots=True)
class SessionView:
    """Everything the UI shows of a session, at one instant (`t`: latest event folded)."""

    t: float | None
    info: SessionInfo
    simulated: bool
    baseline_tok_s: float | None
    window_seconds: float
    servers: tuple[ServerView, ...]
    rows: tuple[RequestRow, ...]
    """The last `max_requests` finished requests, oldest first."""
    in_flight: tuple[RequestRow, ...]
    summary: SummaryView
    percentiles: PercentilesView
    gpu: GpuView
    markers: tuple[MarkerView, ...]
    cycle: CycleView | None
    """None before any ok request."""
    events: int
    """Events folded so far (a reader can tell two views apart)."""
    canaries: tuple[CanaryView, ...] = ()
    """The canary probe of each probed server (`watch --canary`, chat's host mode; core.canary),
    by source; empty when no canary ran."""
    diagnosis: DiagnosisView | None = None
    """The diagnosis analyses (core.diagnosis, docs/diagnosis.md): AL by context, thermal
    attribution, seconds saved, quality sentinel. None where a view is built without them."""
    baseline_from: str | None = None
    """Where `baseline_tok_s` came from: "given" (`--baseline`), "recording" (a replay: the
    baseline the recording was judged against), "stored"; None without a baseline."""

    def server(self, source: str) -> ServerView | None:
        """The view of one server by its base URL."""
        for s in self.servers:
            if s.source == source:
                return s
        return None
