"""`specmon watch` with two servers: each shows its own model and vLLM version (docs/app.md,
"Watching many servers"); the second one showed `vLLM —` and `model —` though it answers /version
and /v1/models."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from specmon.cli.main import main
from specmon.core.events import SessionInfo
from specmon.core.server_identities import IDENTITIES_KEY, ServerIdentityView, server_identity
from specmon.sim.server import SimConfig, start_in_thread


@pytest.fixture
def two_sims() -> Iterator[tuple[str, str]]:
    with (
        start_in_thread(
            SimConfig(profile="gemma4-26b-rtx5090m", speed=50.0, n_spec=8, seed=1),
            log_sink=lambda _l: None,
        ) as a,
        start_in_thread(
            SimConfig(profile="gemma4-31b-spark", speed=50.0, n_spec=4, seed=2),
            log_sink=lambda _l: None,
        ) as b,
    ):
        yield a.url, b.url


def _model_and_version(url: str) -> tuple[str, str]:
    models = httpx.get(f"{url}/v1/models", timeout=5).json()["data"]
    version = httpx.get(f"{url}/version", timeout=5).json()["version"]
    return models[0]["id"], version


def test_watch_json_gives_each_server_its_own_model(two_sims, capsys) -> None:
    a, b = two_sims
    (model_a, version_a), (model_b, version_b) = _model_and_version(a), _model_and_version(b)
    assert model_a != model_b  # two different profiles: two different models
    args = ["watch", "--attach", a, "--attach", b, "--once", "--json", "--interval", "0.1"]
    assert main(args) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["servers"][a]["model"] == model_a
    assert snap["servers"][b]["model"] == model_b
    assert snap["servers"][a]["vllm_version"] == version_a
    assert snap["servers"][b]["vllm_version"] == version_b


def test_watch_table_names_the_second_servers_model(two_sims, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    a, b = two_sims
    model_b, _ = _model_and_version(b)
    args = ["watch", "--attach", a, "--attach", b, "--once", "--interval", "0.1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert model_b[:20] in out


def test_identity_lookup_from_a_session_info() -> None:
    info = SessionInfo(
        server="http://a",
        model="model-a",
        vllm_version="1.0",
        extra={
            IDENTITIES_KEY: [
                {"url": "http://a", "model": "model-a", "vllm_version": "1.0"},
                {"url": "http://b", "model": "model-b", "vllm_version": "2.0"},
                {"url": "http://c", "model": 3, "vllm_version": ["x"]},  # a hostile recording
                "not a mapping",
            ]
        },
    )
    assert server_identity(info, "http://b") == ServerIdentityView("model-b", "2.0")
    assert server_identity(info, "http://a") == ServerIdentityView("model-a", "1.0")
    assert server_identity(info, "http://c") == ServerIdentityView()
    assert server_identity(info, "http://unknown") == ServerIdentityView()
    # One server, no list: the session's own fields (an older recording too).
    assert server_identity(SessionInfo(server="http://a", model="m"), "http://a").model == "m"
    assert server_identity(SessionInfo(server="http://a", model="m"), "http://z").model is None


@pytest.fixture
def busy_sim() -> Iterator[str]:
    """A simulated server answering a stream of requests from ANOTHER client (not specmon's)."""
    with start_in_thread(SimConfig(speed=20.0, n_spec=8, seed=3), log_sink=lambda _l: None) as sim:
        stop = threading.Event()

        def other_client() -> None:
            body = {
                "model": _model_and_version(sim.url)[0],
                "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": 24,
                "stream": True,
            }
            with httpx.Client(timeout=10) as client:
                while not stop.is_set():
                    with client.stream("POST", f"{sim.url}/v1/chat/completions", json=body) as r:
                        for _ in r.iter_lines():
                            pass

        thread = threading.Thread(target=other_client, daemon=True)
        thread.start()
        try:
            yield sim.url
        finally:
            stop.set()
            thread.join(timeout=15)


@pytest.mark.slow
def test_watch_gives_ttft_and_itl_percentiles_from_the_servers_histograms(
    busy_sim, capsys, monkeypatch
) -> None:
    """docs/app.md, "Watching many servers": under other clients' traffic watch showed TTFT/ITL `—`
    (its own streams measured nothing) though the server exports both histograms. They now come from
    the histograms' bucket deltas over the window, labelled with their source."""
    url = busy_sim
    assert main(["watch", "--attach", url, "--once", "--json", "--interval", "1.0"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["requests"]["percentiles"]["ttft_s"]["p50"] is None  # watch sent nothing
    assert snap["requests"]["percentiles_source"] == "from this client's streams"
    latency = snap["servers"][url]["latency"]
    assert latency["source"] == "from server histograms"
    assert latency["ttft_count"] > 0 and latency["itl_count"] > 0
    for key in ("ttft_s", "itl_s"):
        p = latency[key]
        assert p["p50"] is not None and 0 < p["p50"] <= p["p95"] <= p["p99"]
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["watch", "--attach", url, "--once", "--interval", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "latency p50/p95/p99 ms" in out
    (line,) = [ln for ln in out.splitlines() if "TTFT" in ln and "ITL" in ln]
    assert "from server histograms" in line and "—/—/—" not in line.split("ITL")[0]
