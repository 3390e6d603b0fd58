"""The simulator's per-request `metrics.speculative_decoding` (`--per-request-spec-decode-metrics`):
where it appears, what it holds, and that it reconciles with the simulator's /metrics counters and
with its own chunks, exactly as vLLM's does (tests/golden/*spec_* are the real captures)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.sim.conformance_checks import (
    check_spec_object,
    check_steps_are_chunks,
    stream_spec_object,
    stream_step_tokens,
)
from tests.sim.simtest_helpers import CHAT, chat_body, scrape, step_tokens, stream, total

from specmon.sim.server import SimConfig, SimConfigError, resolve
from specmon.sim.spec_metrics import RequestSpecMetrics

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
LEVEL = "per_request_spec_decode_metrics"


def raw_stream(url: str, body: dict[str, Any], path: str = CHAT) -> str:
    with httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(path, json=body)
        assert response.status_code == 200, response.text
        return response.text


def whole(url: str, body: dict[str, Any], path: str = CHAT) -> dict[str, Any]:
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    response = httpx.post(url + path, json=body, timeout=30)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def per_position(page: dict[str, Any], k: int) -> list[float]:
    series = page.get(PER_POS, {})
    return [sum(v for key, v in series.items() if ("position", str(i)) in key) for i in range(k)]


def test_the_object_is_built_as_vllm_builds_it_from_its_steps() -> None:
    """Fed the per-step counts of a real capture, the simulator's object is the real one, key
    for key and value for value (floats included), in both levels."""
    raw = (GOLDEN / "sse" / "spec_detailed-chat-t0-final-usage.sse").read_text()
    real = stream_spec_object(raw)
    detailed = RequestSpecMetrics.new(real["num_spec_tokens"], "detailed")
    summary = RequestSpecMetrics.new(real["num_spec_tokens"], "summary")
    assert detailed is not None and summary is not None
    assert RequestSpecMetrics.new(4, "none") is None
    for drafted, accepted in zip(real["per_step_drafted"], real["per_step_accepted"], strict=True):
        detailed.observe(drafted, accepted)
        summary.observe(drafted, accepted)
    assert json.dumps(detailed.to_dict()) == json.dumps(real)
    real_summary = {k: v for k, v in real.items() if not k.startswith("per_step")}
    assert json.dumps(summary.to_dict()) == json.dumps(real_summary)
    empty = RequestSpecMetrics.new(4, "detailed")
    assert empty is not None
    assert empty.to_dict() == {
        "mean_acceptance_length": 1.0,
        "draft_acceptance_rate": 0.0,
        "acceptance_histogram": [0, 0, 0, 0, 0],
        "num_spec_steps": 0,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 0,
        "num_spec_tokens": 4,
    }


@pytest.mark.parametrize("path", [CHAT, "/v1/completions"])
def test_detailed_stream_carries_it_on_the_final_usage_chunk_only(start_sim, path) -> None:
    sim = start_sim(n_spec=6, **{LEVEL: "detailed"})
    body = chat_body(max_tokens=150)
    if path != CHAT:
        body = {**{k: v for k, v in body.items() if k != "messages"}, "prompt": "Count to ten."}
    raw = raw_stream(sim.url, body, path)
    spec = stream_spec_object(raw)
    check_spec_object(spec, detailed=True, streamed=True)
    assert spec["num_spec_tokens"] == 6 and len(spec["acceptance_histogram"]) == 7
    check_steps_are_chunks(spec, stream_step_tokens(raw))
    # Step j produced per_step_accepted[j] + 1 tokens, the last one included (the simulator's
    # last step is counted as what it emitted), so the steps account for every token.
    assert 1 + spec["num_spec_steps"] + spec["num_accepted_draft_tokens"] == 150
    assert stream_step_tokens(raw) == [a + 1 for a in spec["per_step_accepted"]]


def test_summary_has_no_per_step_arrays_streamed_and_nulls_whole(start_sim) -> None:
    sim = start_sim(n_spec=4, **{LEVEL: "summary"})
    streamed = stream_spec_object(raw_stream(sim.url, chat_body(max_tokens=60, continuous=False)))
    check_spec_object(streamed, detailed=False, streamed=True)
    response = whole(sim.url, chat_body(max_tokens=60))
    metrics = response["metrics"]
    assert {k: v for k, v in metrics.items() if k != "speculative_decoding"} == dict.fromkeys(
        ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms"),
    ) | {"tokens_per_second": None}
    check_spec_object(metrics["speculative_decoding"], detailed=False, streamed=False)
    assert response["usage"]["completion_tokens"] == 60


def test_detailed_whole_response_carries_it_under_top_level_metrics(start_sim) -> None:
    sim = start_sim(n_spec=4, **{LEVEL: "detailed"})
    response = whole(sim.url, chat_body(max_tokens=80))
    spec = response["metrics"]["speculative_decoding"]
    check_spec_object(spec, detailed=True, streamed=False)
    assert 1 + spec["num_spec_steps"] + spec["num_accepted_draft_tokens"] == 80


def test_level_none_is_vllms_default_and_gives_no_object(start_sim) -> None:
    sim = start_sim(n_spec=4)
    chunks = stream(sim.url, chat_body(max_tokens=40))
    assert all("metrics" not in c for c in chunks if c != "[DONE]")
    assert whole(sim.url, chat_body(max_tokens=40))["metrics"] is None
    assert SimConfig().per_request_spec_decode_metrics == "none"


def test_no_usage_chunk_no_object(start_sim) -> None:
    """As in vLLM: the object rides on the usage chunk, so without include_usage it is absent."""
    sim = start_sim(n_spec=4, **{LEVEL: "detailed"})
    body = chat_body(max_tokens=40)
    del body["stream_options"]
    assert stream_spec_object(raw_stream(sim.url, body)) is None


def test_degraded_requests_draft_but_accept_nothing(start_sim) -> None:
    sim = start_sim(n_spec=4, schedule="cycle:1f,1d", **{LEVEL: "detailed"})
    fast = stream_spec_object(raw_stream(sim.url, chat_body(max_tokens=100)))
    degraded = stream_spec_object(raw_stream(sim.url, chat_body(max_tokens=100)))
    assert fast["num_accepted_draft_tokens"] > 0
    assert degraded["per_step_accepted"] == [0] * 99
    assert degraded["acceptance_histogram"] == [99, 0, 0, 0, 0]
    assert degraded["mean_acceptance_length"] == 1.0
    assert degraded["num_draft_tokens"] == 4 * 99


def test_objects_summed_over_requests_equal_the_counter_deltas(start_sim) -> None:
    """Streamed and whole, chat and completions, an EOS stop, and four requests at once: the
    objects, summed, are the deltas of drafts, draft tokens, accepted tokens and per-position
    counts (position i accepted in a step that accepted at least i + 1 drafts)."""
    k = 5
    sim = start_sim(n_spec=k, **{LEVEL: "detailed"})
    before = scrape(sim.url)
    objects: list[dict[str, Any]] = []
    lock = threading.Lock()

    def run(body: dict[str, Any], path: str = CHAT, streamed: bool = True) -> None:
        if streamed:
            spec = stream_spec_object(raw_stream(sim.url, body, path))
        else:
            spec = whole(sim.url, body, path)["metrics"]["speculative_decoding"]
        with lock:
            objects.append(spec)

    run(chat_body(max_tokens=120))
    run(chat_body(max_tokens=90), streamed=False)
    run(
        {"prompt": "Tell me a story.", "max_tokens": 70, "ignore_eos": True},
        "/v1/completions",
        False,
    )
    run(chat_body(max_tokens=200, ignore_eos=False))  # may stop at the end-of-sequence token
    threads = [
        threading.Thread(target=run, args=(chat_body(max_tokens=100 + i),)) for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = scrape(sim.url)

    assert len(objects) == 8
    for spec in objects:
        check_spec_object(spec, detailed=True, streamed=True)

    def delta(name: str) -> float:
        return total(after, name) - total(before, name)

    assert sum(o["num_spec_steps"] for o in objects) == delta(DRAFTS)
    assert sum(o["num_draft_tokens"] for o in objects) == delta(DRAFT_TOKENS)
    assert sum(o["num_accepted_draft_tokens"] for o in objects) == delta(ACCEPTED)
    positions = [sum(1 for o in objects for a in o["per_step_accepted"] if a > i) for i in range(k)]
    moved = [b - a for a, b in zip(per_position(before, k), per_position(after, k), strict=True)]
    assert positions == moved
    generated = sum(1 + o["num_spec_steps"] + o["num_accepted_draft_tokens"] for o in objects)
    assert generated == delta("vllm:generation_tokens_total")
    assert len({o["mean_acceptance_length"] for o in objects}) > 1  # each request its own AL


def test_a_dropped_stream_has_no_object_and_still_counts(start_sim) -> None:
    """A stream cut mid-way never reaches its usage chunk: no object, though its steps count on
    /metrics (as in vLLM, where an aborted request's steps were counted too)."""
    sim = start_sim(n_spec=4, **{LEVEL: "detailed"})
    before = scrape(sim.url)
    received = bytearray()
    with (
        httpx.Client(base_url=sim.url, timeout=30) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream(
            "POST",
            CHAT,
            json=chat_body(max_tokens=100),
            headers={"X-Specmon-Fault": "drop-after=20"},
        ) as response,
    ):
        for piece in response.iter_raw():
            received.extend(piece)
    assert b"speculative_decoding" not in received and b"[DONE]" not in received
    chunks = stream(sim.url, chat_body(max_tokens=50))
    spec = chunks[-2]["metrics"]["speculative_decoding"]
    after = scrape(sim.url)
    assert 0 < spec["num_spec_steps"] < total(after, DRAFTS) - total(before, DRAFTS)
    assert step_tokens(chunks)[2:] == [a + 1 for a in spec["per_step_accepted"]]


@pytest.mark.parametrize("level", ["summary", "detailed"])
def test_a_level_needs_speculation_like_vllm(level: str) -> None:
    with pytest.raises(SimConfigError, match="requires speculative decoding"):
        resolve(SimConfig(n_spec=0, **{LEVEL: level}))  # type: ignore[arg-type]
    assert resolve(SimConfig(n_spec=0)).spec_metrics == "none"
    assert resolve(SimConfig(n_spec=2, **{LEVEL: level})).spec_metrics == level  # type: ignore[arg-type]


def test_an_unknown_level_names_the_choices() -> None:
    with pytest.raises(SimConfigError, match="none, summary, detailed"):
        resolve(SimConfig(**{LEVEL: "full"}))  # type: ignore[arg-type]
