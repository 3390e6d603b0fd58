"""The vanilla baseline a session uses (flag, else the stored n_spec 0 bench) and the default GPU
source, as `watch` and `demo` choose them."""

from __future__ import annotations

import argparse
import json

import pytest

from specmon.cli.main import main
from specmon.cli.session_setup import (
    default_gpu_source,
    positive_float,
)
from specmon.core.events import SessionInfo
from specmon.runtime.baseline import state_factory
from specmon.sources.addresses import url_is_loopback
from specmon.sources.baseline_store import Baseline, BaselineStore, default_path

INFO = SessionInfo(model="gemma-4-26B", gpu="NVIDIA H200", vllm_version="0.32.0")


def _store_with(tok_s: float, *, gpu: str = "NVIDIA H200") -> BaselineStore:
    store = BaselineStore(default_path())
    store.put(Baseline(model="gemma-4-26B", gpu=gpu, vllm_version="0.32.0", tok_s=tok_s))
    return store


def _baseline(state) -> float | None:
    return state.snapshot()["session"]["baseline_tok_s"]


def test_the_flag_wins_over_a_stored_baseline() -> None:
    _store_with(60.0)
    assert _baseline(state_factory(71.5)(INFO)) == 71.5


def test_the_stored_baseline_of_the_same_model_gpu_and_version_is_used() -> None:
    _store_with(60.0)
    assert _baseline(state_factory(None)(INFO)) == 60.0


def test_a_baseline_of_another_gpu_is_not_used() -> None:
    _store_with(60.0, gpu="NVIDIA RTX 5090")
    assert _baseline(state_factory(None)(INFO)) is None


def test_a_simulated_server_never_gets_a_stored_real_baseline() -> None:
    _store_with(60.0)
    simulated = SessionInfo(
        model=INFO.model, gpu=INFO.gpu, vllm_version=INFO.vllm_version, simulated=True
    )
    assert _baseline(state_factory(None)(simulated)) is None


def test_an_unreadable_store_is_reported_and_the_session_runs_without_baseline() -> None:
    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    warnings: list[str] = []
    assert _baseline(state_factory(None, warn=warnings.append)(INFO)) is None
    assert len(warnings) == 1 and str(path) in warnings[0]
    assert path.read_text() == "{not json"  # never overwritten


@pytest.mark.parametrize("text", ["0", "-3", "nan", "inf", "fast"])
def test_baseline_must_be_a_positive_number(text) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        positive_float(text)


def test_watch_passes_the_baseline_flag_to_the_session(sim, capsys) -> None:
    assert main(["watch", "--attach", sim.url, "--once", "--json", "--baseline", "61.8"]) == 0
    snapshot = json.loads(capsys.readouterr().out)
    assert snapshot["session"]["baseline_tok_s"] == 61.8


def test_watch_refuses_a_negative_baseline(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--attach", "http://127.0.0.1:9", "--baseline", "-1"])
    assert exit_.value.code == 2
    assert "--baseline" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("urls", "expected"),
    [
        (["http://127.0.0.1:8000"], "local"),
        (["http://localhost:8000", "http://[::1]:8001"], "local"),
        (["http://127.0.0.1:8000", "http://gpu-box:8000"], "none"),
        (["https://10.0.0.5:8000"], "none"),
    ],
)
def test_gpu_numbers_are_local_only_when_every_server_is(urls, expected) -> None:
    assert default_gpu_source(urls) == expected


def test_loopback_detection() -> None:
    assert url_is_loopback("127.0.0.2:8000") and not url_is_loopback("http://example.org")
