"""The vanilla baseline a session or a replay judges with: `--baseline`, else (a replay) the
recording's, else the stored one; and what a recording's header says was in effect."""

from __future__ import annotations

from specmon.core.events import SessionInfo
from specmon.core.recording_format import RecordedBaseline
from specmon.runtime.baseline import choose_baseline, recorded_baseline, state_factory
from specmon.sources.baseline_store import Baseline, BaselineStore

INFO = SessionInfo(model="m", gpu="H200", vllm_version="0.26.0")


def _store(tmp_path) -> BaselineStore:
    store = BaselineStore(tmp_path / "baselines.json")
    store.put(Baseline("m", "H200", "0.26.0", 200.0))
    return store


def test_given_then_recording_then_stored(tmp_path) -> None:
    store, recorded = _store(tmp_path), RecordedBaseline(133.6, "given")
    assert choose_baseline(99.0, INFO, recorded=recorded, store=store) == (99.0, "given")
    assert choose_baseline(None, INFO, recorded=recorded, store=store) == (133.6, "recording")
    assert choose_baseline(None, INFO, store=store) == (200.0, "stored")
    simulated = SessionInfo(model="m", gpu="H200", vllm_version="0.26.0", simulated=True)
    assert choose_baseline(None, simulated, store=store) == (None, None)
    state = state_factory(None, recorded=recorded, store=store)(INFO)
    assert (state.baseline_tok_s, state.view().baseline_from) == (133.6, "recording")


def test_a_recording_carries_the_stored_baseline_it_used(tmp_path) -> None:
    store = _store(tmp_path)
    assert recorded_baseline(None, INFO, store=store) == RecordedBaseline(200.0, "stored")
    assert recorded_baseline(50.0, INFO, store=store) == RecordedBaseline(50.0, "given")
    assert recorded_baseline(None, SessionInfo(model="other"), store=store) is None
