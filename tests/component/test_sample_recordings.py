"""The sample recordings shipped in recordings/ read cleanly and replay to what they show."""

from __future__ import annotations

from pathlib import Path

from specmon.core.session_state import SessionState
from specmon.sources.recording_player import read_recording

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def test_demo_cycle_recording_is_simulated_and_replays_to_its_cycle() -> None:
    recording = read_recording(RECORDINGS / "demo-cycle.ndjson.gz")
    assert recording.problems == []
    assert recording.info.simulated is True
    state = SessionState(recording.info)
    for event in recording.events:
        state.apply(event)
    snapshot = state.snapshot()
    assert snapshot["simulated"] is True
    assert snapshot["requests"]["summary"]["total"] == 30
    cycle = snapshot["cycle"]
    assert cycle["detected"] is True
    assert (cycle["period"], cycle["transitions_per_cycle"], cycle["degraded_per_cycle"]) == (
        10,
        1.0,
        3.0,
    )
    flagged = [r for r in snapshot["requests"]["rows"] if r["vanilla"]["flagged"]]
    assert len(flagged) == 9  # the three degraded requests of each cycle
