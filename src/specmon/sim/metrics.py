"""The simulated server's /metrics, produced with prometheus_client the way vLLM produces it.

Counters are declared WITHOUT `_total` (prometheus_client adds `_total` and a `_created` sample
on export, as on a real vLLM page); labels are `model_name` and `engine` ("0", or one series per
engine with `engines=N`, as vLLM's data-parallel ranks), plus `position` on
the per-position counter and `finished_reason` on request_success; histograms carry vLLM's own
bucket edges. With n_spec = 0 no `vllm:spec_decode_*` family is registered at all. Each server
instance has its own CollectorRegistry, so several simulators can live in one process, and a
"restart" swaps in a fresh one (every counter back to 0, new `_created` stamps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_N_BUCKETS = (1, 2, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, ... up to `max_value`."""
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """What one finished request contributes to the per-request histograms (seconds)."""

    reason: str
    prompt_tokens: int
    generation_tokens: int
    max_tokens: int
    queue_s: float
    prefill_s: float
    decode_s: float
    e2e_s: float


class EngineMetrics:
    """One engine's children (label `engine="<index>"`) of every family: what one data-parallel
    rank of a vLLM server exports. Requests are served by one engine each."""

    def __init__(self, fams: _Families, model_name: str, engine: str, n_spec: int) -> None:
        lv = {"model_name": model_name, "engine": engine}
        self.running = fams.running.labels(**lv)
        self.waiting = fams.waiting.labels(**lv)
        self.kv_usage = fams.kv_usage.labels(**lv)
        self.preemptions = fams.preemptions.labels(**lv)
        self.prompt_tokens = fams.prompt_tokens.labels(**lv)
        self.generation_tokens = fams.generation_tokens.labels(**lv)
        self.prefix_queries = fams.prefix_queries.labels(**lv)
        self.prefix_hits = fams.prefix_hits.labels(**lv)
        self.success = {r: fams.success.labels(**lv, finished_reason=r) for r in FINISH_REASONS}
        self.h_prompt = fams.h_prompt.labels(**lv)
        self.h_generation = fams.h_generation.labels(**lv)
        self.h_iteration = fams.h_iteration.labels(**lv)
        self.h_max_gen = fams.h_max_gen.labels(**lv)
        self.h_n = fams.h_n.labels(**lv)
        self.h_max_tokens = fams.h_max_tokens.labels(**lv)
        self.h_ttft = fams.h_ttft.labels(**lv)
        self.h_itl = fams.h_itl.labels(**lv)
        self.h_tpot = fams.h_tpot.labels(**lv)
        self.h_e2e = fams.h_e2e.labels(**lv)
        self.h_queue = fams.h_queue.labels(**lv)
        self.h_inference = fams.h_inference.labels(**lv)
        self.h_prefill = fams.h_prefill.labels(**lv)
        self.h_decode = fams.h_decode.labels(**lv)
        if n_spec > 0:
            assert fams.drafts is not None and fams.draft_tokens is not None
            assert fams.accepted is not None and fams.per_pos is not None
            self.drafts = fams.drafts.labels(**lv)
            self.draft_tokens = fams.draft_tokens.labels(**lv)
            self.accepted = fams.accepted.labels(**lv)
            self.per_pos = [fams.per_pos.labels(**lv, position=str(i)) for i in range(n_spec)]

    def record_step(self, tokens: int, drafts: int, draft_tokens: int, accepted: int) -> None:
        """One engine step of one request: tokens emitted and the spec-decode counts."""
        self.generation_tokens.inc(tokens)
        self.h_iteration.observe(tokens)
        if drafts:
            self.drafts.inc(drafts)
            self.draft_tokens.inc(draft_tokens)
            if accepted:
                self.accepted.inc(accepted)
                for child in self.per_pos[:accepted]:
                    child.inc()

    def record_finished(self, done: FinishedRequest) -> None:
        self.success[done.reason].inc()
        self.h_prompt.observe(done.prompt_tokens)
        self.h_generation.observe(done.generation_tokens)
        self.h_max_gen.observe(done.max_tokens)
        self.h_max_tokens.observe(done.max_tokens)
        self.h_n.observe(1)
        self.h_e2e.observe(done.e2e_s)
        self.h_queue.observe(done.queue_s)
        self.h_prefill.observe(done.prefill_s)
        self.h_decode.observe(done.decode_s)
        self.h_inference.observe(done.prefill_s + done.decode_s)
        if done.generation_tokens > 1:
            self.h_tpot.observe(done.decode_s / (done.generation_tokens - 1))


class _Families:
    """Every family of one registry (unbound: each engine binds its own children)."""

    def __init__(
        self, reg: CollectorRegistry, n_spec: int, max_model_len: int, cache_info: dict[str, str]
    ) -> None:
        names = ["model_name", "engine"]

        def counter(name: str, doc: str, extra: Sequence[str] = ()) -> Counter:
            return Counter(name, doc, labelnames=[*names, *extra], registry=reg)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labelnames=names, registry=reg)

        def histogram(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, labelnames=names, buckets=buckets, registry=reg)

        self.running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        self.kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self.cache_info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labelnames=[*sorted(cache_info), "engine"],
            registry=reg,
        )
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.success = counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ["finished_reason"],
        )
        token_buckets = build_1_2_5_buckets(max_model_len)
        self.h_prompt = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.h_generation = histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            token_buckets,
        )
        self.h_iteration = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_TOKENS_BUCKETS,
        )
        self.h_max_gen = histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.h_n = histogram(
            "vllm:request_params_n", "Histogram of the n request parameter.", REQUEST_N_BUCKETS
        )
        self.h_max_tokens = histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            token_buckets,
        )
        self.h_ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.h_itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.h_tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.h_e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.h_queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.h_inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.h_prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.h_decode = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.drafts: Counter | None = None
        self.draft_tokens: Counter | None = None
        self.accepted: Counter | None = None
        self.per_pos: Counter | None = None
        if n_spec > 0:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
            )
            self.accepted = counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
            )
            self.per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                ["position"],
            )


class SimMetrics(EngineMetrics):
    """All vLLM families the simulator exports, with children pre-bound for speed: one set per
    engine (`engines`, data-parallel ranks, label `engine="0"`, `"1"`, …) in `self.engines`;
    the attributes of this object itself are engine 0's (a one-engine server's)."""

    def __init__(
        self,
        model_name: str,
        n_spec: int,
        max_model_len: int,
        cache_info: dict[str, object],
        engines: int = 1,
    ) -> None:
        if engines < 1:
            raise ValueError(f"engines must be at least 1, got {engines}")
        self.model_name = model_name
        self.n_spec = n_spec
        self.max_model_len = max_model_len
        self.cache_info = {k: str(v) for k, v in cache_info.items()}
        self.engine_count = engines
        self.reset()

    def reset(self) -> None:
        """A fresh registry: every counter at 0, as after a server restart."""
        reg = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
        self.registry = reg
        fams = _Families(reg, self.n_spec, self.max_model_len, self.cache_info)
        self.engines = [
            EngineMetrics(fams, self.model_name, str(i), self.n_spec)
            for i in range(self.engine_count)
        ]
        for i in range(self.engine_count):
            fams.cache_info.labels(**self.cache_info, engine=str(i)).set(1)
        EngineMetrics.__init__(self, fams, self.model_name, "0", self.n_spec)

    def render(self) -> bytes:
        """The exposition text of every family."""
        return generate_latest(self.registry)
