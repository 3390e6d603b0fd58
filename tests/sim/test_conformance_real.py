"""Side by side with a LIVE real vLLM (the real tier's fixtures): the same requests to both, the
same shapes back. The real servers come from tests/real_vllm/fixtures.py (marked real_vllm)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tests.real_vllm.server import SPEC_METRICS
from tests.sim.conformance_checks import (
    check_chunks_are_runs_of_steps,
    check_spec_object,
    check_steps_are_chunks,
    exchange_shape,
    metric_shape,
    spec_families,
    sse_shape,
    stream_facts,
    stream_spec_object,
    stream_step_tokens,
)

from specmon.sim.server import RunningSim, SimConfig, start_in_thread

PROFILE = "gemma4-26b-rtx5090"
PROMPT = "Count the stairs: one two three, one two three, one two three."
USAGE_OPTIONS = {
    "nooptions": None,
    "final-usage": {"include_usage": True, "continuous_usage_stats": False},
    "continuous": {"include_usage": True, "continuous_usage_stats": True},
}


@pytest.fixture(scope="module")
def sim_spec() -> Iterator[RunningSim]:
    """Like the real tier's same-weights server: K = 4, `--per-request-spec-decode-metrics
    detailed` and `--enable-per-request-metrics` (the timings beside the spec-decode object)."""
    config = SimConfig(
        profile=PROFILE,
        n_spec=4,
        speed=float("inf"),
        log_interval=0,
        per_request_spec_decode_metrics=SPEC_METRICS,
        enable_per_request_metrics=True,
    )
    with start_in_thread(config, log_sink=lambda line: None) as sim:
        yield sim


@pytest.fixture(scope="module")
def sim_plain() -> Iterator[RunningSim]:
    config = SimConfig(profile=PROFILE, n_spec=0, speed=float("inf"), log_interval=0)
    with start_in_thread(config, log_sink=lambda line: None) as sim:
        yield sim


def model_of(url: str) -> str:
    return httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]


def body(url: str, options: str, stream: bool = True, **extra: object) -> dict:
    out: dict = {
        "model": model_of(url),
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 24,
        "temperature": 0,
        "stream": stream,
    }
    if USAGE_OPTIONS[options] is not None:
        out["stream_options"] = USAGE_OPTIONS[options]
    out.update(extra)
    return out


def raw_stream(url: str, request: dict) -> str:
    response = httpx.post(url + "/v1/chat/completions", json=request, timeout=120)
    assert response.status_code == 200, response.text
    return response.text


@pytest.mark.parametrize("options", sorted(USAGE_OPTIONS))
def test_streams_side_by_side(vllm_draft_same, sim_spec, options) -> None:
    real = raw_stream(vllm_draft_same.url, body(vllm_draft_same.url, options))
    mine = raw_stream(sim_spec.url, body(sim_spec.url, options))
    real_shape, my_shape = sse_shape(real), sse_shape(mine)
    for kind in ("role", "content", "final", "usage", "done"):
        assert (kind in real_shape) == (kind in my_shape), kind
        if kind in real_shape:
            assert my_shape[kind] <= real_shape[kind], kind
    assert stream_facts(mine) == stream_facts(real)


def test_per_request_object_side_by_side(vllm_draft_same, sim_spec) -> None:
    """The real server and the simulator, both at `detailed`: the object on the final usage
    chunk (and only there) and under a whole response's `metrics`, same keys, same invariants;
    the simulator sends one decode chunk per step, the real server chunks that end where steps
    end (its API server merges steps when it falls behind on a loaded machine)."""
    for url in (vllm_draft_same.url, sim_spec.url):
        raw = raw_stream(url, body(url, "continuous"))
        spec = stream_spec_object(raw)
        check_spec_object(spec, detailed=True, streamed=True)
        check_chunks_are_runs_of_steps(spec, raw)
        if url == sim_spec.url:
            check_steps_are_chunks(spec, stream_step_tokens(raw))
        assert stream_spec_object(raw_stream(url, body(url, "nooptions"))) is None
        whole = httpx.post(
            url + "/v1/chat/completions", json=body(url, "nooptions", stream=False), timeout=120
        )
        assert whole.status_code == 200, whole.text
        metrics = whole.json()["metrics"]
        check_spec_object(metrics["speculative_decoding"], detailed=True, streamed=False)


def assert_same_metric_shapes(real_url: str, sim_url: str) -> None:
    for url in (real_url, sim_url):
        raw_stream(url, body(url, "continuous"))
    real_page = httpx.get(real_url + "/metrics", timeout=30).text
    sim_page = httpx.get(sim_url + "/metrics", timeout=30).text
    real, mine = metric_shape(real_page), metric_shape(sim_page)
    assert real
    for family, shape in real.items():
        assert mine.get(family) == shape, family
    assert spec_families(sim_page) == spec_families(real_page)


def test_metrics_side_by_side_with_speculation(vllm_draft_same, sim_spec) -> None:
    assert_same_metric_shapes(vllm_draft_same.url, sim_spec.url)


def test_metrics_side_by_side_without_speculation(vllm_plain, sim_plain) -> None:
    assert_same_metric_shapes(vllm_plain.url, sim_plain.url)


def exchanges(url: str) -> dict[str, tuple[str, str, str | None]]:
    good = body(url, "nooptions", stream=False)
    return {
        "health": ("GET", "/health", None),
        "models": ("GET", "/v1/models", None),
        "nonstream": ("POST", "/v1/chat/completions", json.dumps(good)),
        "bad-json": ("POST", "/v1/chat/completions", '{"model": "tiny", "messa'),
        "unknown-model": (
            "POST",
            "/v1/chat/completions",
            json.dumps({**good, "model": "no-such-model"}),
        ),
        "max-tokens": ("POST", "/v1/chat/completions", json.dumps({**good, "max_tokens": 5000})),
        "missing-messages": ("POST", "/v1/chat/completions", json.dumps({"max_tokens": 4})),
        "n2": ("POST", "/v1/chat/completions", json.dumps({**good, "n": 2})),
        "no-stream-options": (
            "POST",
            "/v1/chat/completions",
            json.dumps({**good, "stream_options": {"include_usage": True}}),
        ),
        "unknown-path": ("GET", "/v1/no-such-path", None),
    }


def shape_of(url: str, method: str, path: str, content: str | None) -> tuple[dict, str]:
    headers = {"Content-Type": "application/json"} if content is not None else {}
    response = httpx.request(method, url + path, content=content, headers=headers, timeout=120)
    shape = exchange_shape(
        response.status_code, response.headers.get("content-type"), response.text
    )
    return shape, response.text


def test_http_exchanges_side_by_side(vllm_plain, sim_plain) -> None:
    real_calls = exchanges(vllm_plain.url)
    sim_calls = exchanges(sim_plain.url)
    for name, call in real_calls.items():
        mine, my_text = shape_of(sim_plain.url, *sim_calls[name])
        real, real_text = shape_of(vllm_plain.url, *call)
        assert mine == real, f"{name}: real {real_text[:400]!r} vs simulated {my_text[:400]!r}"
