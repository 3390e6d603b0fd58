"""Ground truth from live vLLM servers: what every other part of specmon is measured against.

Acceptance length = 1 + Δaccepted / Δdrafts from /metrics counter deltas (exact *_total names,
summed over engines) around the requests; tokens per decode step from continuous_usage_stats.
"""

from __future__ import annotations

import pytest
from tests.real_vllm.probe import (
    GENERATION_TOKENS,
    SPEC_ACCEPTED,
    SPEC_ACCEPTED_PER_POS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    Snapshot,
    chat_body,
    delta,
    scrape,
    scrape_until,
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


def run_and_measure(
    server: VllmServer, prompts: list[str], max_tokens: int, temperature: float
) -> tuple[Snapshot, Snapshot, list[list[int]]]:
    """Counters before and after streaming `prompts` one by one, and each stream's chunk sizes."""
    before = scrape(server.url)
    chunk_sizes = []
    for prompt in prompts:
        chunks = stream_chunks(
            server.url, chat_body(server.model_name, prompt, max_tokens, temperature)
        )
        chunk_sizes.append(tokens_per_chunk(chunks))
    expected = len(prompts) * max_tokens
    generated = before.total(GENERATION_TOKENS) or 0.0
    after = scrape_until(
        server.url, lambda s: (s.total(GENERATION_TOKENS) or 0) >= generated + expected
    )
    return before, after, chunk_sizes


MERGE_ATTEMPTS = 3
"""Measurements of a stream whose chunks merged steps (see `merged`) are repeated up to this."""


def merged(sizes: list[int], accepted: float) -> bool:
    """A negative shortfall: fewer chunks than steps, so vLLM's API server merged steps into one
    chunk (it does when it falls behind its engine on a loaded machine; docs/testing.md). A cut
    last step adds to the shortfall, so a merge may hide behind a cut; a negative shortfall is
    always a merge."""
    decode_chunks = sizes[2:]
    return len(decode_chunks) + accepted - sum(decode_chunks) < 0


def assert_chunks_match_steps(sizes: list[int], accepted: float, n_spec: int) -> None:
    """One chunk per engine step: each decode step streams 1 token plus the drafts it accepted.

    /metrics counts every accepted draft, also those of the last step that max_tokens then cuts
    from the stream (seen: 12 counted, 11 streamed), so the stream may be short by < n_spec.
    """
    decode_chunks = sizes[2:]  # role chunk and prefill chunk excluded
    shortfall = len(decode_chunks) + accepted - sum(decode_chunks)
    assert 0 <= shortfall < max(n_spec, 1), (sizes, accepted)


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
    for _attempt in range(MERGE_ATTEMPTS):
        before, after, [sizes] = run_and_measure(
            vllm_ngram, ["one two three four one two three four one two three four"], 32, 0.0
        )
        accepted = delta(before, after, SPEC_ACCEPTED)
        if not merged(sizes, accepted):
            break
    assert delta(before, after, GENERATION_TOKENS) == sum(sizes) == 32
    assert_chunks_match_steps(sizes, accepted, vllm_ngram.n_spec or 0)
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
    before, after, [sizes] = run_and_measure(vllm_draft_same, PROMPTS[:1], max_tokens, 0.0)

    drafts = delta(before, after, SPEC_DRAFTS)
    accepted = delta(before, after, SPEC_ACCEPTED)
    assert drafts == 8
    assert 1 + accepted / drafts == 5.0
    assert delta(before, after, SPEC_DRAFT_TOKENS) == accepted == drafts * n_spec
    for position in range(n_spec):
        assert delta(before, after, SPEC_ACCEPTED_PER_POS, position=str(position)) == drafts

    assert sizes == [0, 1] + [n_spec + 1] * 8
    decode_chunks = sizes[2:]  # role chunk and prefill chunk excluded
    assert sum(decode_chunks) / len(decode_chunks) == 1 + accepted / drafts
    assert delta(before, after, GENERATION_TOKENS) == sum(sizes) == max_tokens


def test_same_weights_draft_at_temperature_1_loses_most_of_the_speedup(
    vllm_draft_same: VllmServer,
):
    """At temperature 1 the random model's flat distribution makes rejection sampling refuse most
    drafts. How many varies between server starts (0 to ~6% of draft tokens on most, once every
    position-0 draft), so the bound is far from temperature 0's 100%, not zero."""
    before, after, [sizes] = run_and_measure(vllm_draft_same, PROMPTS[1:2], 32, 1.0)
    drafts = delta(before, after, SPEC_DRAFTS)
    accepted = delta(before, after, SPEC_ACCEPTED)
    assert drafts > 0  # speculation is running ...
    assert accepted / delta(before, after, SPEC_DRAFT_TOKENS) < 0.35  # ... mostly refused
    assert 1 + accepted / drafts < 2.5
    assert sizes[:2] == [0, 1]
    assert sum(sizes) == 32
    assert_chunks_match_steps(sizes, accepted, vllm_draft_same.n_spec or 0)


def test_other_seed_draft_accepts_nothing(vllm_draft_other: VllmServer):
    """A draft unrelated to the target: speculation runs at vanilla speed (AL exactly 1.0)."""
    before, after, [sizes] = run_and_measure(vllm_draft_other, PROMPTS[2:3], 32, 0.0)
    drafts = delta(before, after, SPEC_DRAFTS)
    assert drafts > 0
    assert delta(before, after, SPEC_ACCEPTED) == 0
    assert delta(before, after, SPEC_DRAFT_TOKENS) == drafts * 4
    assert sizes == [0] + [1] * 32


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
