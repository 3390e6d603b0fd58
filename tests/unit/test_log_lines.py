"""vLLM log lines: every format of reference §2, round-tripped from vLLM's own format strings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.core.log_lines import (
    EngineLog,
    SpecDecodingLog,
    parse_engine_line,
    parse_log_line,
    parse_spec_decoding_line,
)

PREFIX = "(APIServer pid=4242) INFO 08-20 15:42:49 [loggers.py:310] "
ANSI_PREFIX = (
    "\x1b[36m(APIServer pid=4242)\x1b[0m \x1b[32mINFO\x1b[0m 08-20 15:42:49 [metrics.py:120] "
)

NEW_SPEC = (
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
    "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
    "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
)
V09_SPEC = (
    "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, "
    "Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s"
)
V083_SPEC = (
    "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens"
)
V0_SPEC = (
    "Speculative metrics: Draft acceptance rate: %.3f, System efficiency: %.3f, Number of "
    "speculative tokens: %d, Number of accepted tokens: %d, Number of draft tokens: %d, Number of "
    "emitted tokens: %d."
)
NEW_ENGINE = (
    "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
    "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
)
V0_ENGINE = (
    "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d "
    "reqs, Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: "
    "%.1f%%."
)


@st.composite
def spec_interval(draw):
    """Interval counts as vLLM accumulates them: drafts, K, per-position accepted counts."""
    k = draw(st.integers(1, 15))
    drafts = draw(st.integers(1, 5000))
    per_pos = []
    remaining = drafts
    for _ in range(k):
        remaining = draw(st.integers(0, remaining))
        per_pos.append(remaining)
    return k, drafts, per_pos


# A number printed with %.Nf is within half a unit of its last place; the slack covers the float
# error at exactly half a unit (0.325 prints as "0.33").
ROUND_1DP = 0.05 * (1 + 1e-9) + 1e-12
ROUND_2DP = 0.005 * (1 + 1e-9) + 1e-12
ROUND_3DP = 0.0005 * (1 + 1e-9) + 1e-12


def rates_text(per_pos, drafts):
    return ", ".join("%.3f" % (p / drafts) for p in per_pos)


@given(spec_interval(), st.floats(0.01, 1000), st.sampled_from(["", PREFIX, ANSI_PREFIX]))
def test_new_format_round_trip(interval, seconds, prefix):
    k, drafts, per_pos = interval
    accepted, drafted = sum(per_pos), drafts * k
    al = 1 + accepted / drafts
    line = prefix + NEW_SPEC % (
        al,
        accepted / seconds,
        drafted / seconds,
        accepted,
        drafted,
        rates_text(per_pos, drafts),
        accepted / drafted * 100,
    )
    out = parse_log_line(line)
    assert isinstance(out, SpecDecodingLog) and out.format == "new"
    assert out.acceptance_length == pytest.approx(al, abs=ROUND_2DP)
    assert out.accepted_tokens == accepted and out.drafted_tokens == drafted
    assert out.draft_acceptance_rate == pytest.approx(accepted / drafted, abs=ROUND_3DP)
    assert out.per_position_rates == pytest.approx([p / drafts for p in per_pos], abs=ROUND_3DP)
    assert out.accepted_tok_s == pytest.approx(accepted / seconds, abs=ROUND_2DP)


@given(spec_interval(), st.booleans())
def test_v09_and_v085_are_told_apart_and_normalised_to_include_the_bonus(interval, old):
    k, drafts, per_pos = interval
    accepted, drafted = sum(per_pos), drafts * k
    printed = accepted / drafts if old else 1 + accepted / drafts  # v0.8.5 had no +1
    line = PREFIX + V09_SPEC % (
        accepted / drafted * 100,
        printed,
        accepted,
        drafted,
        rates_text(per_pos, drafts),
    )
    out = parse_spec_decoding_line(line)
    assert out.format == ("v0.8.5" if old else "v0.9")
    assert out.acceptance_length == pytest.approx(1 + accepted / drafts, abs=0.006)


def test_version_hint_decides_when_rates_cannot():
    line = V09_SPEC % (40.0, 1.60, 16, 40, "")  # no per-position numbers to compare with
    line = line.replace("Per-position acceptance rate: ", "Per-position acceptance rate: nan")
    assert parse_spec_decoding_line(line, vllm_version="0.8.5").acceptance_length == pytest.approx(
        2.6
    )
    assert parse_spec_decoding_line(line, vllm_version="0.9.1").acceptance_length == pytest.approx(
        1.6
    )


def test_v083_and_v0_formats():
    out = parse_log_line(PREFIX + V083_SPEC % (37.5, 30, 80))
    assert out.format == "v0.8.3"
    assert out.acceptance_length is None
    assert out.draft_acceptance_rate == pytest.approx(0.375)
    assert (out.accepted_tokens, out.drafted_tokens) == (30, 80)
    v0 = parse_log_line(
        "INFO 05-01 10:00:00 metrics.py:400] " + V0_SPEC % (0.42, 0.5, 4, 42, 100, 90)
    )
    assert v0.format == "v0" and v0.draft_acceptance_rate == pytest.approx(0.42)
    assert v0.accepted_tokens == 42 and v0.drafted_tokens == 100 and v0.acceptance_length is None


def test_nan_rates_when_nothing_was_drafted():
    line = NEW_SPEC.replace("%.1f%%", "nan%%") % (1.0, 0.0, 0.0, 0, 0, "nan, nan")
    out = parse_spec_decoding_line(line)
    assert out.draft_acceptance_rate is None
    assert out.per_position_rates is None


def test_real_cpu_server_line():
    line = (
        "SpecDecoding metrics: Mean acceptance length: 2.89, Accepted throughput: 1.61 tokens/s, "
        "Drafted throughput: 1.71 tokens/s, Accepted: 17 tokens, Drafted: 18 tokens, Per-position "
        "acceptance rate: 1.000, 0.556, 0.222, 0.111, Avg Draft acceptance rate: 94.4%"
    )
    out = parse_log_line(PREFIX + line)
    assert out.acceptance_length == 2.89
    assert out.per_position_rates == (1.0, 0.556, 0.222, 0.111)
    assert out.draft_acceptance_rate == pytest.approx(0.944)


@given(
    engine=st.integers(0, 7),
    prompt=st.floats(0, 1e5),
    gen=st.floats(0, 1e5),
    running=st.integers(0, 512),
    waiting=st.integers(0, 512),
    kv=st.floats(0, 1),
    hit=st.floats(0, 1),
    prefix=st.sampled_from(["", PREFIX, ANSI_PREFIX]),
)
def test_engine_line_round_trip(engine, prompt, gen, running, waiting, kv, hit, prefix):
    out = parse_log_line(
        prefix + NEW_ENGINE % (engine, prompt, gen, running, waiting, kv * 100, hit * 100)
    )
    assert isinstance(out, EngineLog) and out.format == "v1"
    assert out.engine == engine
    assert out.prompt_tok_s == pytest.approx(prompt, abs=ROUND_1DP)
    assert out.generation_tok_s == pytest.approx(gen, abs=ROUND_1DP)
    assert (out.running, out.waiting) == (running, waiting)
    assert out.kv_cache_usage == pytest.approx(kv, abs=ROUND_3DP)
    assert out.prefix_cache_hit_rate == pytest.approx(hit, abs=ROUND_3DP)


def test_engine_line_optional_parts_and_aggregated_prefix():
    line = (
        "2 Engines Aggregated: Avg prompt throughput: 10.0 tokens/s, Avg generation "
        "throughput: 148.6 tokens/s, Running: 3 reqs, Waiting: 4 reqs, Deferred: 1 reqs, "
        "Preemptions: 2, GPU KV cache usage: 12.5%, Prefix cache hit rate: 50.0%, Corrupted: 0 "
        "reqs, External prefix cache hit rate: 0.0%, MM cache hit rate: 0.0%"
    )
    out = parse_engine_line(PREFIX + line)
    assert out.engine is None and out.engines_aggregated == 2
    assert out.deferred == 1 and out.preemptions == 2
    assert out.kv_cache_usage == pytest.approx(0.125)


def test_v0_engine_line():
    out = parse_engine_line(
        "INFO 05-01 10:00:00 metrics.py:351] " + V0_ENGINE % (1.0, 14.0, 1, 0, 2, 1.5, 0.0)
    )
    assert out.format == "v0"
    assert (out.running, out.swapped, out.waiting) == (1, 0, 2)
    assert out.kv_cache_usage == pytest.approx(0.015)
    assert out.cpu_kv_cache_usage == 0.0


@pytest.mark.parametrize(
    "line",
    [
        "",
        "INFO:     Application startup complete.",
        "Engine 000: Iteration(12): 1 context requests, 64 context tokens, 0 generation requests",
        "SpecDecoding metrics: garbage",
        "DiffusionDecoding metrics: Committed token throughput: 1.0 tokens/s",
        "\x1b[31m\x00\xff weird bytes",
    ],
)
def test_other_lines_give_none(line):
    assert parse_log_line(line) is None


HUGE = "9" * 5000  # past Python's int() digit limit (4300)


def test_absurdly_long_counts_do_not_raise():
    # log text is untrusted: an over-long number leaves that field (or line) unparsed, no ValueError
    engine = parse_engine_line(
        PREFIX + "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
        f"2.0 tokens/s, Running: {HUGE} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%"
    )
    assert engine is not None and engine.running is None and engine.waiting == 0
    spec = PREFIX + f"SpecDecoding metrics: Accepted: {HUGE} tokens, Drafted: 10 tokens"
    assert parse_spec_decoding_line(spec) is None
    v0 = (
        "Speculative metrics: Draft acceptance rate: 0.5, System efficiency: 0.5, Number of "
        f"speculative tokens: 4, Number of accepted tokens: {HUGE}, Number of draft tokens: 8, "
        "Number of emitted tokens: 9"
    )
    assert parse_log_line(v0) is None
    assert (
        parse_log_line(
            f"Engine {HUGE}: Avg prompt throughput: 1 tokens/s, "
            "Avg generation throughput: 2 tokens/s"
        )
        is not None
    )
