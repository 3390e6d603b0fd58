"""The simulator against captures of a REAL vLLM server (tests/golden/, see its README.md).

For every capture, the simulator gets the same request and must answer with the same shape:
/metrics families specmon reads (type, label names, bucket edges) and the presence or absence of
spec-decode families; SSE chunk kinds and key structures, usage semantics and [DONE]; status codes
and error bodies; the stats log line templates. Values differ (a tiny CPU model vs a simulated
GPU), shapes must not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.sim.conformance_checks import (
    check_spec_object,
    check_steps_are_chunks,
    exchange_shape,
    log_template,
    metric_shape,
    spec_families,
    sse_shape,
    stream_facts,
    stream_spec_object,
    stream_step_tokens,
)

from specmon.sim.server import RunningSim, SimConfig, start_in_thread

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
INFO = GOLDEN / "capture-info.json"
PROFILE = "gemma4-26b-rtx5090"  # max_model_len 2048, like a small real server's limits
REAL_MODEL = "tiny"
N_ABOVE_1 = "-n2-t1-nonstream"
"""Captures of `n: 2` at temperature 1, which the simulator refuses (it serves n = 1 only)."""

pytestmark = pytest.mark.skipif(
    not INFO.exists(), reason="golden captures of a real vLLM are not in tests/golden yet"
)


def info() -> dict:
    return json.loads(INFO.read_text())


def golden_files(sub: str, pattern: str = "*") -> list[Path]:
    return sorted((GOLDEN / sub).glob(pattern)) if (GOLDEN / sub).is_dir() else []


def real_n_spec(server: str) -> int:
    n = info()["servers"].get(server, {}).get("n_spec")
    return int(n) if n else 0


def real_spec_metrics(server: str) -> str:
    """The server's `--per-request-spec-decode-metrics` level ("none" when not given)."""
    args = info()["servers"].get(server, {}).get("serve_args", [])
    flag = "--per-request-spec-decode-metrics"
    return str(args[args.index(flag) + 1]) if flag in args else "none"


def sim_for(sims: _Lazy, server: str) -> RunningSim:
    """The simulator configured like the real server: same n_spec, same per-request level."""
    return sims[real_n_spec(server), real_spec_metrics(server)]


@pytest.fixture(scope="module")
def sims() -> Iterator[_Lazy]:
    """One simulator per (n_spec, per-request level) the real servers used, unlimited speed."""
    running: dict[tuple[int, str], RunningSim] = {}

    def get(key: tuple[int, str]) -> RunningSim:
        if key not in running:
            n_spec, level = key
            config = SimConfig(
                profile=PROFILE,
                n_spec=n_spec,
                speed=float("inf"),
                log_interval=0,
                per_request_spec_decode_metrics=level,
            )
            running[key] = start_in_thread(config, log_sink=lambda line: None)
        return running[key]

    yield _Lazy(get)
    for sim in running.values():
        sim.stop()


class _Lazy:
    def __init__(self, get: Callable[[tuple[int, str]], RunningSim]) -> None:
        self._get = get

    def __getitem__(self, key: tuple[int, str]) -> RunningSim:
        return self._get(key)


def for_sim(body: dict | None, sim: RunningSim) -> dict | None:
    """The captured request, aimed at the simulator's model where it named the real one."""
    if body is None:
        return None
    body = dict(body)
    if body.get("model") == REAL_MODEL:
        body["model"] = httpx.get(sim.url + "/v1/models").json()["data"][0]["id"]
    return body


def chat_body_for(stream_name: str) -> dict:
    """Rebuild the request of a captured stream from its file name (see capture_golden.py)."""
    match = re.search(r"chat-t(\d)-(nooptions|plain|final-usage|continuous)$", stream_name)
    assert match, stream_name
    body: dict = {
        "model": REAL_MODEL,
        "messages": [{"role": "user", "content": info()["prompt"]}],
        "max_tokens": info()["max_tokens"],
        "temperature": int(match.group(1)),
        "stream": True,
    }
    if match.group(2) in ("final-usage", "continuous"):
        body["stream_options"] = {
            "include_usage": True,
            "continuous_usage_stats": match.group(2) == "continuous",
        }
    return body


def sim_stream(sim: RunningSim, body: dict) -> str:
    with httpx.Client(base_url=sim.url, timeout=60) as client:
        response = client.post("/v1/chat/completions", json=for_sim(body, sim))
        assert response.status_code == 200
        return response.text


def traffic(sim: RunningSim) -> None:
    """The captures' traffic before the "after" page: two continuous-usage streams."""
    for temperature in (0, 1):
        body = chat_body_for(f"chat-t{temperature}-continuous")
        sim_stream(sim, body)


def _server_of(path: Path) -> str:
    """The real server a capture came from, as capture-info.json lists its files."""
    relative = str(path.relative_to(GOLDEN))
    for name, server in info()["servers"].items():
        if relative in server.get("files", []):
            return str(name)
    raise AssertionError(f"{relative} is not listed in capture-info.json")


@pytest.mark.parametrize("path", golden_files("metrics", "*.txt"), ids=lambda p: p.stem)
def test_metric_families_match(sims, path: Path) -> None:
    sim = sim_for(sims, _server_of(path))
    if path.stem.endswith("-after"):
        traffic(sim)
    real_page = path.read_text()
    sim_page = httpx.get(sim.url + "/metrics").text
    real = metric_shape(real_page)
    mine = metric_shape(sim_page)
    assert real, "the capture has none of the families specmon reads"
    for family, shape in real.items():
        assert family in mine, f"{family} is on the real page but not on the simulator's"
        assert mine[family] == shape, family
    assert spec_families(sim_page) == spec_families(real_page)


@pytest.mark.parametrize("path", golden_files("sse", "*.sse"), ids=lambda p: p.stem)
def test_stream_shapes_match(sims, path: Path) -> None:
    sim = sim_for(sims, _server_of(path))
    raw_real = path.read_text()
    raw_sim = sim_stream(sim, chat_body_for(path.stem))
    real, mine = sse_shape(raw_real), sse_shape(raw_sim)
    # the kinds a simulated stream shows must be the real ones, with the same key structure
    for kind in ("role", "content", "final", "usage", "done"):
        assert (kind in real) == (kind in mine), kind
        if kind in real:
            assert mine[kind] <= real[kind], kind
    assert stream_facts(raw_sim) == stream_facts(raw_real)


@pytest.mark.parametrize(
    "path",
    [p for p in golden_files("http", "*.json") if not p.stem.endswith(N_ABOVE_1)],
    ids=lambda p: p.stem,
)
def test_http_exchanges_match(sims, path: Path) -> None:
    record = json.loads(path.read_text())
    sim = sim_for(sims, _server_of(path))
    request = record["request"]
    body = request["body"]
    if body is not None:
        try:
            content = json.dumps(for_sim(json.loads(body), sim))
        except json.JSONDecodeError:
            content = body  # a malformed body is replayed as it was
    else:
        content = None
    headers = {"Content-Type": "application/json"} if content is not None else {}
    response = httpx.request(
        request["method"], sim.url + request["path"], content=content, headers=headers
    )
    real = exchange_shape(record["status"], record["content_type"], record["body"])
    mine = exchange_shape(response.status_code, response.headers.get("content-type"), response.text)
    if path.stem == "version":
        # the simulator adds simulated/profile/n_spec to vLLM's {"version": ...}
        assert mine["status"] == real["status"] == 200
        assert set(json.loads(record["body"])) <= set(response.json())
        assert response.json()["simulated"] is True
        return
    assert mine == real


def test_stats_log_lines_match_real_templates(sims) -> None:
    real_templates = {
        t
        for p in golden_files("logs", "*-stats.log")
        for line in p.read_text().splitlines()
        if (t := log_template(line))
    }
    if not real_templates:
        pytest.skip("no stats log lines in the captures")
    lines: list[str] = []
    for n_spec in sorted({real_n_spec(s) for s in info()["servers"]}):
        sim = sims[n_spec, "none"]
        sim_stream(sim, chat_body_for("chat-t0-continuous"))
        app = sim.app
        sink = app.log_sink
        app.log_sink = lines.append
        try:
            sim.call(lambda app=app: app.log_interval(1.0, False))
        finally:
            app.log_sink = sink
    mine = {log_template(line) for line in lines}
    assert mine and mine <= real_templates, mine - real_templates


# ------------------------------------------------------------------ metrics.speculative_decoding


def _spec_captures() -> list[Path]:
    """Every capture that holds vLLM's per-request object (streams and whole responses)."""
    return [
        p
        for p in golden_files("sse", "*.sse") + golden_files("http", "*.json")
        if '"speculative_decoding"' in p.read_text().replace('\\"', '"')
    ]


def _exchange_spec(body: str) -> object:
    metrics = json.loads(body)["metrics"]
    assert isinstance(metrics, dict)
    return metrics["speculative_decoding"]


@pytest.mark.parametrize("path", _spec_captures(), ids=lambda p: p.stem)
def test_per_request_object_matches_the_real_one(sims, path: Path) -> None:
    """The same request to a simulator at the same level: the object sits in the same place
    (streamed: only the final usage chunk; whole: top-level `metrics` with the timing fields
    null), with the same keys in the same order and types, and holds the same invariants as the
    real one (checked on the capture too): histogram of K+1, AL = 1 + accepted/steps, per-step
    arrays that add up, and one decode chunk per step."""
    server = _server_of(path)
    level = real_spec_metrics(server)
    assert level in ("summary", "detailed"), f"{path.name}: object from a server at {level}"
    sim = sim_for(sims, server)
    detailed = level == "detailed"
    if path.suffix == ".sse":
        raw_real = path.read_text()
        raw_sim = sim_stream(sim, chat_body_for(path.stem))
        for raw in (raw_real, raw_sim):
            spec = stream_spec_object(raw)
            check_spec_object(spec, detailed=detailed, streamed=True)
            if detailed and path.stem.endswith("-continuous"):
                check_steps_are_chunks(spec, stream_step_tokens(raw))
        return
    record = json.loads(path.read_text())
    request = record["request"]
    response = httpx.post(
        sim.url + request["path"], json=for_sim(json.loads(request["body"]), sim), timeout=60
    )
    assert response.status_code == record["status"] == 200
    for body in (record["body"], response.text):
        metrics = json.loads(body)["metrics"]
        assert list(metrics) == [
            "time_to_first_token_ms",
            "generation_time_ms",
            "queue_time_ms",
            "mean_itl_ms",
            "tokens_per_second",
            "speculative_decoding",
        ]
        assert all(metrics[key] is None for key in list(metrics)[:-1])
        check_spec_object(metrics["speculative_decoding"], detailed=detailed, streamed=False)


def test_the_spec_captures_cover_both_levels_streamed_and_whole() -> None:
    """The captures this file checks against exist (a regeneration that lost them fails here)."""
    found = {(real_spec_metrics(_server_of(p)), p.suffix) for p in _spec_captures()}
    assert found == {
        ("summary", ".sse"),
        ("summary", ".json"),
        ("detailed", ".sse"),
        ("detailed", ".json"),
    }


@pytest.mark.parametrize(
    "path",
    [p for p in golden_files("http", "*.json") if p.stem.endswith(N_ABOVE_1)],
    ids=lambda p: p.stem,
)
def test_n_above_1_has_no_per_request_object(sims, path: Path) -> None:
    """vLLM gives no object for n > 1 (the stats belong to one sequence only): `metrics` is
    null. The simulator serves n = 1 only and refuses n = 2 with a 400, so it never has to."""
    record = json.loads(path.read_text())
    real = json.loads(record["body"])
    assert record["status"] == 200 and len(real["choices"]) == 2
    assert real["metrics"] is None
    sim = sim_for(sims, _server_of(path))
    response = httpx.post(
        sim.url + "/v1/chat/completions",
        json=for_sim(json.loads(record["request"]["body"]), sim),
        timeout=60,
    )
    assert response.status_code == 400
    assert "only n=1" in response.json()["error"]["message"]
