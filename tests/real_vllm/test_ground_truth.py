"""Ground truth from live vLLM servers: what every other part of specmon is measured against.

Acceptance length = 1 + Δaccepted / Δdrafts from /metrics counter deltas (exact *_total names,
summed over engines) around the requests; tokens per decode step from continuous_usage_stats.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from tests.real_vllm.probe import (
    GENERATION_TOKENS,
    SPEC_ACCEPTED,
    SPEC_ACCEPTED_PER_POS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    Snapshot,
    assert_chunks_are_whole_steps,
    chat_body,
    delta,
    scrape,
    scrape_until,
    server_step_tokens,
    stream_chunks,
    tokens_per_chunk,
)
from tests.real_vllm.server import VllmServer

pytestmark = pytest.mark.real_vllm

PROMPTS = [
    "The garden needs water on Tuesday.",
    "Seven small boats rested in the harbour.",
    "Tokens per second is a rate.",
    "The old clock in the hall gains three minutes every week.",
    "She took the early train to the coast.",
]


@dataclass(frozen=True)
class Stream:
    sizes: list[int]
    """completion tokens added by each chunk with choices: the role chunk (0) first."""
    steps: list[int]
    """Tokens of each engine step, from vLLM's own per-request object (detailed)."""

    def merged_chunks(self) -> int:
        """Asserts that the content chunks are whole steps (a merge of several is legitimate
        when the API server falls behind on a loaded machine; a split is not) and returns how
        many chunks the merges saved."""
        assert self.sizes[0] == 0, f"the role chunk comes first and carries no token: {self.sizes}"
        return assert_chunks_are_whole_steps(self.sizes[1:], self.steps)


def run_and_measure(
    server: VllmServer, prompts: list[str], max_tokens: int, temperature: float
) -> tuple[Snapshot, Snapshot, list[Stream]]:
    """Counters before and after streaming `prompts` one by one, and each stream's chunk sizes
    and engine steps."""
    before = scrape(server.url)
    streams = []
    for prompt in prompts:
        chunks = stream_chunks(
            server.url, chat_body(server.model_name, prompt, max_tokens, temperature)
        )
        streams.append(Stream(tokens_per_chunk(chunks), server_step_tokens(chunks)))
    expected = len(prompts) * max_tokens
    generated = before.total(GENERATION_TOKENS) or 0.0
    after = scrape_until(
        server.url, lambda s: (s.total(GENERATION_TOKENS) or 0) >= generated + expected
    )
    return before, after, streams


def assert_steps_match_metrics(stream: Stream, before: Snapshot, after: Snapshot) -> None:
    """vLLM's per-request steps hold the request's /metrics deltas (it ran alone): one draft per
    step, its accepted drafts plus one token each."""
    drafts, accepted = delta(before, after, SPEC_DRAFTS), delta(before, after, SPEC_ACCEPTED)
    assert len(stream.steps) == drafts
    assert sum(stream.steps) == drafts + accepted


# plain and ngram first: they are not needed later, so the draft servers that other real tests
# reuse can stay up together (at most 3 alive) and each server starts once.


def test_ngram_server_exports_spec_decode_counters_per_engine(vllm_ngram: VllmServer):
    """ngram speculation: the same families, labelled engine and model_name, at 0 or above."""
    snapshot = scrape(vllm_ngram.url)
    for name in (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED):
        labels = [dict(labels) for sample, labels in snapshot.samples if sample == name]
        assert labels and all(
            label["engine"] == "0" and label["model_name"] == vllm_ngram.model_name
            for label in labels
        ), (name, labels)
    positions = {
        dict(labels)["position"]
        for sample, labels in snapshot.samples
        if sample == SPEC_ACCEPTED_PER_POS
    }
    assert positions == {str(p) for p in range(vllm_ngram.n_spec or 0)}
    before, after, [stream] = run_and_measure(
        vllm_ngram, ["one two three four one two three four one two three four"], 32, 0.0
    )
    accepted = delta(before, after, SPEC_ACCEPTED)
    assert delta(before, after, GENERATION_TOKENS) == sum(stream.sizes) == 32
    # ngram proposes nothing in a step whose context has no match: such a step streams one token
    # and is no speculative step, so vLLM's per-step object does not list it. Each step streams
    # 1 + its accepted drafts (max_tokens may cut the last by < n_spec), and a chunk holds at
    # least one step: chunks <= steps = decode tokens - accepted + cut.
    decode_chunks = stream.sizes[2:]
    assert stream.sizes[:1] == [0] and stream.sizes[1] >= 1
    assert len(decode_chunks) <= sum(stream.sizes[1:]) - 1 - accepted + (vllm_ngram.n_spec or 0)
    assert delta(before, after, SPEC_DRAFTS) > 0
    assert accepted <= delta(before, after, SPEC_DRAFT_TOKENS)


def test_plain_server_has_no_spec_decode_families(vllm_plain: VllmServer):
    snapshot = scrape(vllm_plain.url)
    assert GENERATION_TOKENS in snapshot.families()
    assert not [name for name in snapshot.families() if name.startswith("vllm:spec_decode")]
    assert snapshot.total(SPEC_DRAFTS) is None


def test_same_weights_draft_at_temperature_0_accepts_everything(vllm_draft_same: VllmServer):
    """AL 5.0 from counter deltas; role chunk 0, prefill chunk 1, then 5 tokens per decode chunk."""
    n_spec = vllm_draft_same.n_spec
    assert n_spec == 4
    max_tokens = 1 + 8 * (n_spec + 1)  # prefill token + 8 full decode steps
    before, after, [stream] = run_and_measure(vllm_draft_same, PROMPTS[:1], max_tokens, 0.0)

    drafts = delta(before, after, SPEC_DRAFTS)
    accepted = delta(before, after, SPEC_ACCEPTED)
    assert drafts == 8
    assert 1 + accepted / drafts == 5.0
    assert delta(before, after, SPEC_DRAFT_TOKENS) == accepted == drafts * n_spec
    for position in range(n_spec):
        assert delta(before, after, SPEC_ACCEPTED_PER_POS, position=str(position)) == drafts

    # Role chunk, prefill token, then 5 tokens per step; a chunk may carry several whole steps
    # when the API server fell behind (counted, bounded by the 9 chunks there are to merge).
    assert stream.steps == [n_spec + 1] * 8
    assert 0 <= stream.merged_chunks() <= 8
    decode_chunks = [t for t in stream.sizes[2:] if t <= n_spec + 1]  # the steps read alone
    assert set(decode_chunks) <= {n_spec + 1}
    assert (sum(stream.sizes) - 1) / len(stream.steps) == 1 + accepted / drafts
    assert delta(before, after, GENERATION_TOKENS) == sum(stream.sizes) == max_tokens


def test_same_weights_draft_at_temperature_1_loses_most_of_the_speedup(
    vllm_draft_same: VllmServer,
):
    """At temperature 1 the random model's flat distribution makes rejection sampling refuse most
    drafts. How many varies between server starts (0 to ~6% of draft tokens on most, once every
    position-0 draft), so the bound is far from temperature 0's 100%, not zero."""
    before, after, [stream] = run_and_measure(vllm_draft_same, PROMPTS[1:2], 32, 1.0)
    drafts = delta(before, after, SPEC_DRAFTS)
    accepted = delta(before, after, SPEC_ACCEPTED)
    assert drafts > 0  # speculation is running ...
    assert accepted / delta(before, after, SPEC_DRAFT_TOKENS) < 0.35  # ... mostly refused
    assert 1 + accepted / drafts < 2.5
    assert sum(stream.sizes) == 32
    assert_steps_match_metrics(stream, before, after)
    stream.merged_chunks()


def test_other_seed_draft_accepts_nothing(vllm_draft_other: VllmServer):
    """A draft unrelated to the target: speculation runs at vanilla speed (AL exactly 1.0)."""
    before, after, [stream] = run_and_measure(vllm_draft_other, PROMPTS[2:3], 32, 0.0)
    drafts = delta(before, after, SPEC_DRAFTS)
    assert drafts > 0
    assert delta(before, after, SPEC_ACCEPTED) == 0
    assert delta(before, after, SPEC_DRAFT_TOKENS) == drafts * 4
    # One token per step (prefill, then 31 steps); chunks may merge steps, never split one.
    assert stream.steps == [1] * 31
    assert sum(stream.sizes) == 32
    stream.merged_chunks()


def test_noised_draft_acceptance_is_partial_and_falls_with_position(
    vllm_draft_noised: VllmServer,
):
    before, after, _ = run_and_measure(vllm_draft_noised, PROMPTS, 41, 0.0)
    drafts = delta(before, after, SPEC_DRAFTS)
    assert drafts > 0
    rates = [
        delta(before, after, SPEC_ACCEPTED_PER_POS, position=str(position)) / drafts
        for position in range(4)
    ]
    assert rates == sorted(rates, reverse=True), rates
    assert rates[0] >= rates[3] + 0.2, rates
    assert rates[3] > 0.0 and rates[0] < 0.95, rates
    acceptance_length = 1 + delta(before, after, SPEC_ACCEPTED) / drafts
    assert acceptance_length == pytest.approx(1 + sum(rates))
    assert 1.5 < acceptance_length < 4.5
