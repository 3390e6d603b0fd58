"""Read a live vLLM server the simple way (httpx + prometheus_client), for ground-truth tests.

Deliberately independent of specmon's own parsers: these are the reference numbers the project's
code is compared against.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Snapshot:
    """Every sample of one /metrics page: (exact sample name, sorted labels) -> value."""

    samples: dict[tuple[str, Labels], float]

    def total(self, name: str, **match: str) -> float | None:
        """Sum over engines (and any other label not matched) of the samples named exactly `name`.

        None when no such sample exists (a missing family is not 0).
        """
        values = [
            value
            for (sample, labels), value in self.samples.items()
            if sample == name and all(dict(labels).get(k) == v for k, v in match.items())
        ]
        return sum(values) if values else None

    def families(self) -> set[str]:
        return {name for name, _ in self.samples}


def scrape(url: str) -> Snapshot:
    response = httpx.get(f"{url}/metrics", timeout=10.0)
    response.raise_for_status()
    samples: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return Snapshot(samples)


def delta(before: Snapshot, after: Snapshot, name: str, **match: str) -> float:
    first, last = before.total(name, **match), after.total(name, **match)
    if first is None or last is None:
        raise AssertionError(f"{name} {match} missing from /metrics")
    return last - first


def scrape_until(
    url: str, done: Callable[[Snapshot], bool], attempts: int = 50, pause_s: float = 0.2
) -> Snapshot:
    """Scrape until `done` holds: counters may lag the end of a stream by one stats update."""
    snapshot = scrape(url)
    for _ in range(attempts):
        if done(snapshot):
            return snapshot
        time.sleep(pause_s)
        snapshot = scrape(url)
    return snapshot


def chat_body(
    model: str, prompt: str, max_tokens: int, temperature: float, continuous: bool = True
) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": continuous},
    }


def stream_chunks(url: str, body: dict[str, object]) -> list[dict[str, object]]:
    """The JSON chunks of a streamed chat completion, in order ([DONE] excluded)."""
    chunks: list[dict[str, object]] = []
    with (
        httpx.Client(timeout=120.0) as client,
        client.stream("POST", f"{url}/v1/chat/completions", json=body) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            payload = line[len("data: ") :]
            if payload == "[DONE]":
                break
            chunks.append(json.loads(payload))
    return chunks


def tokens_per_chunk(chunks: list[dict[str, object]]) -> list[int]:
    """completion_tokens added by each chunk that has choices (continuous_usage_stats)."""
    counts: list[int] = []
    previous = 0
    for chunk in chunks:
        usage = chunk.get("usage")
        if not chunk.get("choices") or not isinstance(usage, dict):
            continue
        completion = int(usage["completion_tokens"])
        counts.append(completion - previous)
        previous = completion
    return counts


def server_step_tokens(chunks: list[dict[str, object]]) -> list[int]:
    """Tokens each verify step produced (accepted drafts + 1), from vLLM's own per-request
    `metrics.speculative_decoding` (detailed) on the final usage chunk."""
    for chunk in reversed(chunks):
        metrics = chunk.get("metrics")
        spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("per_step_accepted"), list):
            return [int(accepted) + 1 for accepted in spec["per_step_accepted"]]
    raise AssertionError("no metrics.speculative_decoding with per_step_accepted in the stream")


def assert_chunks_are_whole_steps(chunk_tokens: list[int], step_tokens: list[int]) -> int:
    """The stream's content chunks cut the answer only between engine steps: the prefill token
    (1), then each step's tokens; a chunk that carries several steps was merged by vLLM's API
    server when it fell behind its engine (a loaded machine), which is legitimate and counted,
    never a step split. `max_tokens` may cut the last step. Returns how many chunks were merged
    away (steps + 1 - chunks), which holds whatever the load."""
    produced = list(itertools.accumulate([1, *step_tokens]))  # tokens after the prefill, each step
    received = list(itertools.accumulate(chunk_tokens))
    assert chunk_tokens and all(t > 0 for t in chunk_tokens), chunk_tokens
    assert set(received[:-1]) <= set(produced[:-1]), (
        f"chunks {chunk_tokens} split a step of {step_tokens} (prefill 1 first)"
    )
    cut = produced[-1] - received[-1]
    assert 0 <= cut < step_tokens[-1] if step_tokens else cut == 0, (chunk_tokens, step_tokens)
    return len(produced) - len(received)
