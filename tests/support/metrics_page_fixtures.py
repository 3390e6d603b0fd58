"""Realistic vLLM /metrics pages built with prometheus_client itself (vLLM exports with it), so
names, `_total`/`_created` samples, label order, escaping and float formatting are the real ones.

Families mirror reference/vllm-observability.md §1: the ones specmon reads, vLLM families it does
not read (to be filtered out), HTTP/process/GC families, and the older (aliased) names.
"""

from __future__ import annotations

import random

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
ITL_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
]
E2E_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]
TOKEN_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
ITER_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]

READ_COUNTERS = [
    "vllm:generation_tokens",
    "vllm:prompt_tokens",
    "vllm:num_preemptions",
]
UNREAD_COUNTERS = [
    "vllm:prompt_tokens_cached",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
]


def vllm_page(
    *,
    seed: int = 0,
    engines: tuple[str, ...] = ("0",),
    model: str = "tiny",
    n_spec: int | None = 4,
    names: str = "current",
    noise: bool = True,
) -> str:
    """A /metrics page. `names`: "current", "both" (v0.9.2-0.11) or "old" (before the renames).
    `n_spec` None: no speculative decoding (no spec families at all)."""
    rng = random.Random(seed)
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]

    def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, [*labels, *extra], registry=reg)

    def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, [*labels, *extra], registry=reg)

    def hist(name: str, doc: str, buckets: list[float]) -> Histogram:
        return Histogram(name, doc, labels, buckets=buckets, registry=reg)

    counters = {n: counter(n, f"Number of {n}.") for n in READ_COUNTERS + UNREAD_COUNTERS}
    success = counter("vllm:request_success", "Count of successful requests.", ("finished_reason",))
    prefix = []
    if names in ("current", "both"):
        prefix += ["vllm:prefix_cache_queries", "vllm:prefix_cache_hits"]
    if names in ("old", "both"):
        prefix += ["vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_hits"]
    for n in prefix:
        counters[n] = counter(n, "Prefix cache tokens.")
    running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
    waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
    kv = []
    if names in ("current", "both"):
        kv.append(gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."))
    if names in ("old", "both"):
        kv.append(gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage."))
    sleep = gauge("vllm:engine_sleep_state", "Engine sleep state", ("sleep_state",))
    info = Gauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        ["block_size", "cache_dtype", "engine", "gpu_memory_utilization", "num_gpu_blocks"],
        registry=reg,
    )
    hists = [
        hist("vllm:time_to_first_token_seconds", "Histogram of time to first token.", TTFT_BUCKETS),
        hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency.", E2E_BUCKETS),
        hist("vllm:request_time_per_output_token_seconds", "TPOT per request.", ITL_BUCKETS),
        hist("vllm:request_queue_time_seconds", "Queue time.", E2E_BUCKETS),
        hist("vllm:request_prefill_time_seconds", "Prefill time.", E2E_BUCKETS),
        hist("vllm:request_decode_time_seconds", "Decode time.", E2E_BUCKETS),
        hist("vllm:request_prompt_tokens", "Prompt tokens.", TOKEN_BUCKETS),
        hist("vllm:request_generation_tokens", "Generation tokens.", TOKEN_BUCKETS),
        hist("vllm:iteration_tokens_total", "Tokens per engine step.", ITER_BUCKETS),
    ]
    if names in ("current", "both"):
        hists.append(hist("vllm:inter_token_latency_seconds", "Inter-token latency.", ITL_BUCKETS))
    if names in ("old", "both"):
        hists.append(hist("vllm:time_per_output_token_seconds", "Per-step ITL (old).", ITL_BUCKETS))
    spec = {}
    if n_spec is not None:
        for n in (
            "vllm:spec_decode_num_drafts",
            "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens",
        ):
            spec[n] = counter(n, f"Number of {n}.")
        per_pos = counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            ("position",),
        )

    for engine in engines:
        lab = (model, engine)
        for c in counters.values():
            c.labels(*lab).inc(rng.randint(0, 100_000))
        for reason in ("stop", "length", "abort", "error", "repetition"):
            success.labels(*lab, reason).inc(rng.randint(0, 500))
        running.labels(*lab).set(rng.randint(0, 8))
        waiting.labels(*lab).set(rng.randint(0, 8))
        for g in kv:
            g.labels(*lab).set(rng.random())
        for state in ("awake", "weights_offloaded", "discard_all"):
            sleep.labels(*lab, state).set(1 if state == "awake" else 0)
        info.labels("16", "auto", engine, "0.92", str(rng.randint(100, 9000))).set(1)
        for h in hists:
            child = h.labels(*lab)  # the series exists (all zero) before any observation
            for _ in range(rng.randint(0, 20)):
                child.observe(rng.expovariate(1.0) * 3)
        if n_spec is not None:
            drafts = rng.randint(0, 10_000)
            spec["vllm:spec_decode_num_drafts"].labels(*lab).inc(drafts)
            spec["vllm:spec_decode_num_draft_tokens"].labels(*lab).inc(drafts * n_spec)
            remaining = drafts
            accepted = 0
            for pos in range(n_spec):
                remaining = rng.randint(0, remaining)
                per_pos.labels(*lab, str(pos)).inc(remaining)
                accepted += remaining
            spec["vllm:spec_decode_num_accepted_tokens"].labels(*lab).inc(accepted)
    if noise:
        process_collector.ProcessCollector(registry=reg)
        gc_collector.GCCollector(registry=reg)
        platform_collector.PlatformCollector(registry=reg)
        http = Counter(
            "http_requests",
            "Total number of requests.",
            ["handler", "method", "status"],
            registry=reg,
        )
        dur = Histogram(
            "http_request_duration_seconds", "Latency.", ["handler", "method"], registry=reg
        )
        for handler in ("/v1/chat/completions", "/v1/models", "/version"):
            http.labels(handler, "POST", "2xx").inc(rng.randint(1, 50))
            dur.labels(handler, "POST").observe(rng.random())
    return generate_latest(reg).decode("utf-8")
