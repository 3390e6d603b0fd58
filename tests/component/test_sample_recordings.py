"""The sample recordings shipped in recordings/ read cleanly and replay to what they show."""

from __future__ import annotations

from pathlib import Path

from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.sources.recording_player import Recording, read_recording

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
    # the badges (recordings/README.md): those 9 and the transition of each cycle
    summary = snapshot["requests"]["summary"]
    assert summary["flagged"] == 12
    assert summary["verdicts"] == {"vanilla-speed": 9, "transition": 3, "loop": 0, "garbled": 0}
    kinds = {r["request_id"]: r["verdict"]["kind"] for r in snapshot["requests"]["rows"]}
    assert [rid for rid, kind in kinds.items() if kind == "transition"] == ["r6", "r16", "r26"]


def _replayed(name: str) -> tuple[Recording, SessionView]:
    recording = read_recording(RECORDINGS / name)
    assert recording.problems == []
    assert recording.info.simulated is True  # every sample is labelled simulated
    state = SessionState(recording.info)
    for event in recording.events:
        state.apply(event)
    return recording, state.view()


def test_healthy_recording_replays_without_flags_cycle_or_reset() -> None:
    _, view = _replayed("healthy.ndjson.gz")
    assert view.simulated is True
    assert view.summary.total == view.summary.ok == 12
    assert view.summary.flagged == 0
    assert all(
        r.vanilla is not None and r.vanilla.judged and not r.vanilla.flagged for r in view.rows
    )
    assert view.cycle is not None and view.cycle.detected is False
    (server,) = view.servers
    assert server.counter_resets == 0
    assert [m.kind for m in view.markers if m.kind == "counter_reset"] == []
    # Speculation works: every answer's acceptance length well above 1.
    assert all(r.acceptance is not None and r.acceptance.acceptance_length > 2 for r in view.rows)
    # Since start = everything this session generated (the simulator started with it).
    tokens = sum(r.completion_tokens or 0 for r in view.rows)
    assert server.lifetime is not None and server.lifetime.since_reset_t is None
    assert server.lifetime.generation_tokens == server.totals.generation_tokens == tokens


def test_restart_recording_shows_the_reset_and_lifetime_numbers_since_it() -> None:
    _, view = _replayed("restart.ndjson.gz")
    assert view.summary.total == 14 and view.summary.flagged == 0
    (server,) = view.servers
    assert server.counter_resets > 0
    resets = [m for m in view.markers if m.kind == "counter_reset"]
    assert len(resets) == 1
    reset_t = resets[0].t
    # The server restarted as request 9 arrived: the reset is seen by the scrape after it.
    ninth, tenth = view.rows[8], view.rows[9]
    assert ninth.t_send is not None and tenth.t_send is not None
    assert ninth.t_send < reset_t < tenth.t_send
    lifetime = server.lifetime
    assert lifetime is not None and lifetime.since_reset_t == reset_t
    after = sum(r.completion_tokens or 0 for r in view.rows[8:])
    assert lifetime.generation_tokens == after
    # The session's own totals are reset-corrected: every token of all 14 requests.
    assert server.totals.generation_tokens == sum(r.completion_tokens or 0 for r in view.rows)
    assert lifetime.acceptance_length is not None and lifetime.acceptance_length > 2


def test_real_gpu_bench_recordings_replay_with_the_baseline_they_were_judged_against(
    capsys,
) -> None:
    """`bench --baseline 133.6 --record` on a real GPU flagged r1, r2 and r4 of the temperature-1
    run VANILLA SPEED (docs/gpu.md); `specmon replay FILE --json` without --baseline flags the same
    answers, with the recording's baseline (its header), not the stored one."""
    import json

    from specmon.cli.main import main

    path = RECORDINGS / "gpu-h200x2-real-dflash-trained-k7-low-temp1.ndjson.gz"
    assert main(["replay", str(path), "--json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert (snap["session"]["baseline_tok_s"], snap["session"]["baseline_from"]) == (
        133.6,
        "recording",
    )
    kinds = {r["request_id"]: r["verdict"]["kind"] for r in snap["requests"]["rows"]}
    assert kinds == {
        "r1": "vanilla-speed",
        "r2": "vanilla-speed",
        "r3": "loop",
        "r4": "vanilla-speed",
    }
    for name in ("k7-memorised-recited", "k7-prose-loops", "ctx256-long-answer"):
        recording = read_recording(RECORDINGS / f"gpu-h200x2-real-dflash-trained-{name}.ndjson.gz")
        assert recording.baseline is not None and recording.baseline.tok_s == 133.6
