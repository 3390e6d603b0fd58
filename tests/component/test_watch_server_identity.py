"""`specmon watch` with two servers: each shows its own model and vLLM version (issue 19 item 11);
the second one showed `vLLM —` and `model —` though it answers /version and /v1/models."""

from __future__ import annotations

import json
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
