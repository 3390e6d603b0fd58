"""The /metrics families specmon reads, their exported sample names, and the older names (aliases).

One table that the page parser, the counter maths, the recorder and the simulator share, so a
name is spelled once. Names are the EXPORTED ones (prometheus_client adds `_total` to counters;
histograms export `_bucket`, `_sum`, `_count`). `*_created` samples are never read.
"""

from __future__ import annotations

MAX_PAGE_BYTES = 8 * 1024 * 1024
"""Largest /metrics (or dcgm-exporter) page read: a bigger one is refused as unreadable."""

# ---------------------------------------------------------------- current names

SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"
PREEMPTIONS = "vllm:num_preemptions_total"
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"

REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
V0_DRAFT_ACCEPTANCE_RATE = "vllm:spec_decode_draft_acceptance_rate"
"""V0 gauge (0..1). No AL can be derived from it (V0 exported no draft count)."""

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
E2E_LATENCY = "vllm:e2e_request_latency_seconds"

COUNTERS: frozenset[str] = frozenset(
    {
        SPEC_DRAFTS,
        SPEC_DRAFT_TOKENS,
        SPEC_ACCEPTED,
        SPEC_ACCEPTED_PER_POS,
        GENERATION_TOKENS,
        PROMPT_TOKENS,
        REQUEST_SUCCESS,
        PREEMPTIONS,
        PREFIX_CACHE_QUERIES,
        PREFIX_CACHE_HITS,
    }
)
GAUGES: frozenset[str] = frozenset(
    {REQUESTS_RUNNING, REQUESTS_WAITING, KV_CACHE_USAGE, V0_DRAFT_ACCEPTANCE_RATE}
)
HISTOGRAMS: frozenset[str] = frozenset({TTFT, ITL, TPOT, E2E_LATENCY})
"""Histogram base names; their samples are `<base>_bucket`, `<base>_sum`, `<base>_count`."""

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

QUANTILE_HISTOGRAMS: frozenset[str] = frozenset({TTFT, ITL})
"""Histograms whose `_bucket` lines ARE read: watch's TTFT and ITL percentiles from the server's
own histograms (core.histogram_quantiles), for traffic of other clients. ~40 samples a page."""
QUANTILE_BUCKET_NAMES: frozenset[str] = frozenset(base + "_bucket" for base in QUANTILE_HISTOGRAMS)

HISTOGRAM_READ_SUFFIXES = ("_sum", "_count")
"""The histogram samples specmon reads: sum and count give the mean per interval. The `_bucket`
lines (about three quarters of the read samples) are skipped: nothing uses them, and skipping them
keeps the filtered parse under a fifth of a full parse and the recordings small."""

SPEC_PREFIX = "vllm:spec_decode_"
"""Any family with this prefix on a page means speculative decoding is configured."""

# ---------------------------------------------------------------- older names

ALIASES: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": KV_CACHE_USAGE,
    "vllm:gpu_prefix_cache_queries_total": PREFIX_CACHE_QUERIES,
    "vllm:gpu_prefix_cache_hits_total": PREFIX_CACHE_HITS,
    **{
        "vllm:time_per_output_token_seconds" + suffix: ITL + suffix
        for suffix in (*HISTOGRAM_READ_SUFFIXES, "_bucket")
    },
}
"""Older exported sample name -> current exported sample name (reference §1.3 renames).

An alias is read only when the page has no sample of its current name: vLLM 0.9.2-0.11 export both,
and reading both would double every sum."""


def _current_sample_names() -> frozenset[str]:
    names = set(COUNTERS) | set(GAUGES)
    for base in HISTOGRAMS:
        names.update(base + suffix for suffix in HISTOGRAM_READ_SUFFIXES)
    names.update(base + "_bucket" for base in QUANTILE_HISTOGRAMS)
    return frozenset(names)


CURRENT_SAMPLE_NAMES: frozenset[str] = _current_sample_names()
"""Every exported sample name of the current families."""

READ_SAMPLE_NAMES: frozenset[str] = CURRENT_SAMPLE_NAMES | frozenset(ALIASES)
"""Every exported sample name specmon keeps from a page (current names and aliases)."""


def _family_names() -> frozenset[str]:
    """Names that may appear on `# HELP` / `# TYPE` lines of the families read."""
    names = set(READ_SAMPLE_NAMES)
    for name in READ_SAMPLE_NAMES:
        for suffix in ("_total", *HISTOGRAM_SUFFIXES):
            if name.endswith(suffix):
                names.add(name[: -len(suffix)])
    return frozenset(names)


FAMILY_NAMES: frozenset[str] = _family_names()

COUNTER_SAMPLE_NAMES: frozenset[str] = frozenset(
    COUNTERS
    | {base + suffix for base in HISTOGRAMS for suffix in HISTOGRAM_READ_SUFFIXES}
    | {base + "_bucket" for base in QUANTILE_HISTOGRAMS}
    | {alias for alias, current in ALIASES.items() if current not in GAUGES}
)
"""Sample names whose values only grow (counters and histogram parts): a drop is a reset."""


def is_counter(name: str) -> bool:
    """True for a sample name whose value only grows between restarts."""
    return name in COUNTER_SAMPLE_NAMES
