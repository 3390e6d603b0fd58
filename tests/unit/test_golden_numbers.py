"""Core maths on the golden captures of a real vLLM server (tests/golden/): /metrics deltas, the
server's own log lines, and the stream's chunk token counts must tell the same story."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon.core.counters import deltas_between
from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.log_lines import EngineLog, SpecDecodingLog, parse_log_line
from specmon.core.metrics_page import parse_metrics_page
from specmon.core.specdecode import n_spec_of, spec_configured, spec_decode_stats
from specmon.core.stream_stats import RequestTrace, request_stats

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SPEC_SERVERS = ["ngram", "draft_same", "draft_noised"]


def page(name: str):
    return parse_metrics_page((GOLDEN / "metrics" / f"{name}.txt").read_text(encoding="utf-8"))


def log_lines(server: str) -> list[str]:
    return (GOLDEN / "logs" / f"{server}-stats.log").read_text(encoding="utf-8").splitlines()


def test_plain_server_has_no_spec_decode():
    assert spec_configured(page("plain-after")) is False
    assert n_spec_of(page("plain-after")) is None


@pytest.mark.parametrize("server", SPEC_SERVERS)
def test_spec_servers_are_configured_with_k4(server):
    fresh = page(f"{server}-fresh")
    assert spec_configured(fresh) is True and n_spec_of(fresh) == 4


@pytest.mark.parametrize("server", SPEC_SERVERS)
def test_log_line_sums_equal_metrics_deltas(server):
    deltas, resets = deltas_between(page(f"{server}-fresh"), page(f"{server}-after"))
    assert resets == ()
    stats = spec_decode_stats(deltas)
    logs = [parse_log_line(line) for line in log_lines(server)]
    spec = [x for x in logs if isinstance(x, SpecDecodingLog)]
    assert spec, "the capture has SpecDecoding lines"
    assert sum(x.accepted_tokens for x in spec) == stats.accepted
    assert sum(x.drafted_tokens for x in spec) == stats.draft_tokens


@pytest.mark.parametrize("server", SPEC_SERVERS)
def test_each_spec_log_line_is_self_consistent(server):
    for line in log_lines(server):
        x = parse_log_line(line)
        if not isinstance(x, SpecDecodingLog) or not x.drafted_tokens:
            continue
        assert x.format == "new"
        if server != "ngram":  # a draft model always proposes K tokens; ngram may propose fewer
            drafts = x.drafted_tokens / 4
            assert x.acceptance_length == pytest.approx(1 + x.accepted_tokens / drafts, abs=0.005)
        assert sum(x.per_position_rates) == pytest.approx(x.acceptance_length - 1, abs=0.01)


def test_same_weights_draft_per_position_rates_are_flat():
    # Greedy same-weights draft: a draft is either fully accepted (t=0) or not at all (t=1).
    deltas, _ = deltas_between(page("draft_same-fresh"), page("draft_same-after"))
    st = spec_decode_stats(deltas)
    assert st.accepted == 4 * st.per_position_rates[0] * st.drafts
    assert len(set(st.per_position_rates)) == 1
    assert st.acceptance_length == pytest.approx(1 + st.accepted / st.drafts)


def test_noised_draft_per_position_rates_do_not_rise():
    deltas, _ = deltas_between(page("draft_noised-fresh"), page("draft_noised-after"))
    rates = spec_decode_stats(deltas).per_position_rates
    assert list(rates) == sorted(rates, reverse=True)


@pytest.mark.parametrize("server", ["plain", *SPEC_SERVERS])
def test_every_stats_line_is_read_or_ignored(server):
    for line in log_lines(server):
        x = parse_log_line(line)
        if "Engine 000:" in line:
            assert isinstance(x, EngineLog) and x.engine == 0
            assert x.kv_cache_usage is not None  # "CPU KV cache usage" on the CPU backend
        elif "SpecDecoding metrics:" in line:
            assert isinstance(x, SpecDecodingLog)
        else:
            assert x is None


def sse_trace(name: str, dt: float = 0.01) -> RequestTrace:
    """The events the stream client makes of a captured SSE stream (arrival times synthetic: one
    chunk every `dt`); the usage-only message becomes RequestEnded, as in sources.stream_client."""
    text = (GOLDEN / "sse" / f"{name}.sse").read_text(encoding="utf-8")
    trace = RequestTrace(name)
    trace.add(RequestStarted(t=0.0, request_id=name, source="golden", model="tiny"))
    t = 0.0
    completion = None
    for line in text.splitlines():
        if not line.startswith("data: {"):
            continue
        t += dt
        chunk = json.loads(line[len("data: ") :])
        usage = chunk.get("usage") or {}
        completion = usage.get("completion_tokens", completion)
        if not chunk["choices"]:
            continue
        delta = chunk["choices"][0].get("delta") or {}
        trace.add(
            StreamChunk(
                t=t,
                request_id=name,
                text=delta.get("content") or "",
                role=delta.get("role"),
                completion_tokens=usage.get("completion_tokens"),
                finish_reason=chunk["choices"][0].get("finish_reason"),
            )
        )
    trace.add(RequestEnded(t=t, request_id=name, completion_tokens=completion))
    return trace


def test_same_weights_greedy_stream_gives_client_al_five():
    s = request_stats(sse_trace("draft_same-chat-t0-continuous"), n_spec=4)
    assert s.chunk_tokens[0] == 1  # the prefill token alone
    assert s.client_acceptance_length == 5.0
    assert s.merged_chunks == 0
    assert sum(s.chunk_tokens) == s.completion_tokens


def test_temperature_one_stream_accepts_nothing():
    s = request_stats(sse_trace("draft_same-chat-t1-continuous"), n_spec=4)
    assert s.client_acceptance_length == 1.0
    assert s.single_token_chunks == s.decode_chunks > 0


def test_noised_draft_stream_is_between():
    s = request_stats(sse_trace("draft_noised-chat-t0-continuous"), n_spec=4)
    assert 1.0 < s.client_acceptance_length < 5.0
