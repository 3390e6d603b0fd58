"""Per-request stream statistics: TTFT, decode/e2e tok/s, TPOT, ITL, chunk tokens, client AL."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.stream_stats import RequestTrace, request_stats, validate_server_spec


def trace_of(steps, *, t0=0.0, ttft=0.5, dt=0.1, end_outcome="ok", spec=None, usage=True):
    """A request: send at t0, role chunk at t0+ttft (0 tokens), then one chunk per step of
    `steps` tokens every dt, then the usage message (RequestEnded) dt later."""
    tr = RequestTrace("r1")
    tr.add(RequestStarted(t=t0, request_id="r1", source="s", model="m", max_tokens=256))
    t = t0 + ttft
    tr.add(
        StreamChunk(t=t, request_id="r1", role="assistant", completion_tokens=0 if usage else None)
    )
    cum = 0
    for i, k in enumerate(steps):
        t += dt if i else 0.0
        cum += k
        tr.add(
            StreamChunk(
                t=t,
                request_id="r1",
                text="x" * k,
                completion_tokens=cum if usage else None,
                finish_reason="length" if i == len(steps) - 1 else None,
            )
        )
    tr.add(
        RequestEnded(
            t=t + dt,
            request_id="r1",
            outcome=end_outcome,
            completion_tokens=cum if usage else None,
            spec_decoding=spec,
        )
    )
    return tr


def test_greedy_same_weights_k4_definitions():
    # prefill token alone, then 5 tokens per step (4 accepted + bonus), K = 4
    tr = trace_of([1] + [5] * 10)
    s = request_stats(tr, n_spec=4)
    assert s.completion_tokens == 51
    assert s.ttft_s == pytest.approx(0.5)  # the role chunk counts, as in vllm bench
    assert s.t_first_token == pytest.approx(0.5)
    assert s.t_last_token == pytest.approx(0.5 + 1.0)
    assert s.decode_tok_s == pytest.approx(50 / 1.0)
    assert s.e2el_s == pytest.approx(1.6)
    assert s.e2e_tok_s == pytest.approx(51 / 1.6)
    assert s.tpot_s == pytest.approx((1.6 - 0.5) / 50)
    assert len(s.itl_s) == 11  # gaps between the 12 choice chunks; the usage message adds none
    assert s.itl_s[0] == pytest.approx(0.0) and s.itl_s[1] == pytest.approx(0.1)
    assert s.chunk_tokens == (1,) + (5,) * 10
    assert s.decode_chunks == 10
    assert s.merged_chunks == 0
    assert s.client_acceptance_length == 5.0


def test_merged_chunks_are_excluded_and_counted():
    s = request_stats(trace_of([1, 5, 4, 12, 5, 3]), n_spec=4)
    assert s.merged_chunks == 1
    assert s.decode_chunks == 5
    # 12 merged, 3 cut by max_tokens (the finish chunk): neither counts
    assert s.client_acceptance_length == pytest.approx((5 + 4 + 5) / 3)


def test_final_chunk_cut_by_the_limit_is_not_counted():
    s = request_stats(trace_of([1, 5, 5, 5, 2]), n_spec=4)
    assert s.client_acceptance_length == 5.0
    assert s.chunk_tokens == (1, 5, 5, 5, 2) and s.completion_tokens == 18


def test_unknown_k_cannot_tell_merges():
    s = request_stats(trace_of([1, 5, 12, 3]), n_spec=None)
    assert s.merged_chunks is None
    assert s.client_acceptance_length == pytest.approx(8.5)


def test_vanilla_yield_one_token_per_chunk():
    s = request_stats(trace_of([1] * 40), n_spec=8)
    assert s.client_acceptance_length == 1.0
    assert s.single_token_chunks == 39


def test_no_usage_numbers_time_from_text_chunks_and_tokens_unknown():
    s = request_stats(trace_of([1, 2, 3], usage=False), n_spec=4)
    assert s.completion_tokens is None
    assert s.decode_tok_s is None and s.e2e_tok_s is None and s.tpot_s is None
    assert s.t_first_token == pytest.approx(0.5)
    assert s.client_acceptance_length is None
    assert s.ttft_s == pytest.approx(0.5)


def test_failed_request_keeps_received_tokens():
    tr = RequestTrace("r")
    tr.add(RequestStarted(t=0.0, request_id="r", source="s", model="m"))
    tr.add(StreamChunk(t=0.2, request_id="r", role="assistant", completion_tokens=0))
    tr.add(StreamChunk(t=0.3, request_id="r", text="a", completion_tokens=1))
    tr.add(StreamChunk(t=0.4, request_id="r", text="bcd", completion_tokens=4))
    tr.add(RequestEnded(t=0.9, request_id="r", outcome="failed", error="connection reset"))
    s = request_stats(tr, n_spec=4)
    assert s.outcome == "failed" and s.error == "connection reset"
    assert s.completion_tokens == 4
    assert s.decode_tok_s == pytest.approx(3 / 0.1)


def test_running_request_has_no_end_numbers():
    tr = RequestTrace("r")
    tr.add(RequestStarted(t=0.0, request_id="r", source="s", model="m"))
    tr.add(StreamChunk(t=0.2, request_id="r", role="assistant", completion_tokens=0))
    s = request_stats(tr)
    assert s.outcome == "running"
    assert s.e2el_s is None and s.e2e_tok_s is None and s.decode_tok_s is None
    assert s.ttft_s == pytest.approx(0.2)


def test_shrinking_cumulative_count_is_not_trusted():
    tr = RequestTrace("r")
    tr.add(StreamChunk(t=0.1, request_id="r", text="a", completion_tokens=5))
    tr.add(StreamChunk(t=0.2, request_id="r", text="b", completion_tokens=3))
    tr.add(StreamChunk(t=0.3, request_id="r", text="c", completion_tokens=6))
    s = request_stats(tr)
    assert s.chunk_tokens == (5, 1)
    assert all(k > 0 for k in s.chunk_tokens)


def test_server_side_spec_stats():
    spec = {
        "mean_acceptance_length": 9.9,  # wrong on purpose: recomputed from the counts
        "draft_acceptance_rate": 0.5,
        "num_spec_steps": 10,
        "num_accepted_draft_tokens": 30,
        "num_draft_tokens": 40,
        "num_spec_tokens": 4,
        "acceptance_histogram": [0, 0, 0, 10, 0],
    }
    s = request_stats(trace_of([1, 4, 4], spec=spec), n_spec=4)
    assert s.server_spec.mean_acceptance_length == 4.0
    assert s.server_spec.draft_acceptance_rate == 0.75
    assert s.server_spec.num_spec_tokens == 4


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("garbage", "not an object (str)"),
        ({"num_spec_steps": "ten"}, "num_spec_steps is not a whole number >= 0"),
        ({"num_spec_steps": True}, "num_spec_steps is not a whole number >= 0"),
        ({"num_spec_steps": -1}, "num_spec_steps is not a whole number >= 0"),
    ],
)
def test_server_spec_garbage_is_ignored_with_the_reason_not_a_crash(data, why):
    assert validate_server_spec(data) == (None, f"server per-request metrics ignored: {why}")


def test_no_server_spec_is_none_without_a_note():
    assert validate_server_spec(None) == (None, None)


def test_zero_spec_steps_gives_no_al():
    out, note = validate_server_spec({"num_spec_steps": 0, "num_accepted_draft_tokens": 0})
    assert out is not None and note is None
    assert out.num_spec_steps == 0 and out.mean_acceptance_length is None


@given(
    st.lists(st.integers(1, 12), min_size=2, max_size=80),
    st.floats(0.001, 1.0),
    st.floats(0.0, 5.0),
)
def test_property_chunk_tokens_sum_to_completion_tokens(steps, dt, ttft):
    s = request_stats(trace_of(steps, dt=dt, ttft=ttft), n_spec=8)
    assert sum(s.chunk_tokens) == s.completion_tokens == sum(steps)
    assert s.decode_chunks == len(steps) - 1
    assert s.merged_chunks == sum(1 for k in steps[1:] if k > 9)
    assert s.decode_tok_s == pytest.approx((sum(steps) - 1) / (dt * (len(steps) - 1)))
    assert all(x >= 0 for x in s.itl_s)
