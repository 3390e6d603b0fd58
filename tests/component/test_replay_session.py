"""The replay engine (runtime/replay_session.py): the play clock, speed, pause, seek (a backward
seek rebuilds the state and equals a forward fold), jumps, the graphs' samples and the timeline,
on the sample recordings, with a fake clock (no sleeping, no timing thresholds)."""

from __future__ import annotations

import dataclasses
import gc
import gzip
import tracemalloc
from pathlib import Path

import pytest
from tests.support.recordings import cycling_recording

from specmon.core import session_state
from specmon.core.clock import FakeClock
from specmon.core.events import Marker, ServerLogLine, SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.watch_json import snapshot_of
from specmon.runtime.replay_session import (
    LEAD_IN_S,
    SPEEDS,
    ReplaySession,
    clamp_speed,
)
from specmon.runtime.replay_session import flagged as flagged_row
from specmon.sources.recording_player import Recording, RecordingReader, read_recording
from specmon.ui.replay_app import replay_port

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def _session(name: str, **kwargs: object) -> tuple[ReplaySession, FakeClock, Recording]:
    recording = read_recording(RECORDINGS / name)
    clock = FakeClock(100.0)
    info = recording.info
    session = ReplaySession(
        info,
        recording.events,
        lambda: SessionState(info),
        clock=clock,
        **kwargs,  # type: ignore[arg-type]
    )
    return session, clock, recording


def _folded_until(recording: Recording, t: float) -> SessionState:
    state = SessionState(recording.info)
    for event in recording.events:
        if event.t <= t:
            state.apply(event)
    return state


def test_the_play_head_moves_with_the_clock_times_the_speed() -> None:
    session, clock, _ = _session("demo-cycle.ndjson.gz")
    assert session.position().t == 0.0 and session.position().playing
    clock.advance(2.0)
    assert session.advance().t == pytest.approx(2.0)
    session.set_speed(4.0)
    clock.advance(2.0)
    assert session.advance().t == pytest.approx(10.0)
    assert session.toggle_pause() is False
    clock.advance(30.0)
    assert session.advance().t == pytest.approx(10.0)  # paused: the head stays
    assert session.toggle_pause() is True
    clock.advance(1.0)
    assert session.advance().t == pytest.approx(14.0)


def test_playing_stops_at_the_end_and_resuming_there_starts_again() -> None:
    session, clock, recording = _session("healthy.ndjson.gz", speed=64.0)
    clock.advance(1000.0)
    end = session.advance()
    assert end.at_end and not end.playing and end.t == session.end
    assert end.events_applied == end.events_total == len(recording.events)
    assert session.view().summary.total == 12
    assert session.toggle_pause() is True
    assert session.position().t == session.start
    assert session.view().summary.total == 0


def test_speed_steps_through_the_ladder_and_stays_in_it() -> None:
    session, _, _ = _session("healthy.ndjson.gz")
    seen = [session.speed]
    for _ in range(10):
        seen.append(session.faster())
    assert seen == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 64.0, 64.0, 64.0, 64.0]
    down = [session.slower() for _ in range(9)]
    assert down == [32.0, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.5, 0.5]
    assert SPEEDS[0] == 0.5 and SPEEDS[-1] == 64.0
    assert clamp_speed(1000.0) == 64.0 and clamp_speed(0.01) == 0.5
    assert clamp_speed(float("nan")) == 1.0 and clamp_speed(-2.0) == 1.0
    session.set_speed(3.0)  # --speed 3: off the ladder, + goes to the next step up
    assert session.faster() == 4.0


@pytest.mark.parametrize("name", ["demo-cycle.ndjson.gz", "restart.ndjson.gz"])
def test_a_backward_seek_rebuilds_the_state_as_a_forward_fold_would(name: str) -> None:
    session, _, recording = _session(name, playing=False)
    target = session.end * 0.4
    session.seek(session.end)
    assert session.rebuilds == 0
    back = session.seek(target)
    assert back.t == pytest.approx(target) and session.rebuilds == 1
    expected = _folded_until(recording, target).view()
    assert snapshot_of(session.view()) == snapshot_of(expected)
    assert session.view() == expected
    # and forward again: the same as folding straight to the end
    session.seek(session.end)
    assert session.view() == session.final_view


def test_a_recording_begun_late_plays_from_its_first_event_with_the_true_clock() -> None:
    """docs/replay.md: a recording begun with F5 has its first event at 37 s on the session's
    clock; at x1 the screen showed `connecting` for 37 s. Playing starts LEAD_IN_S before the
    first event, and the times shown still count from the recording's clock zero."""
    recording = read_recording(RECORDINGS / "healthy.ndjson.gz")
    late = [dataclasses.replace(e, t=e.t + 37.0) for e in recording.events]
    first = late[0].t
    clock = FakeClock(100.0)
    info = recording.info
    session = ReplaySession(info, late, lambda: SessionState(info), clock=clock)
    at = session.position()
    assert at.t == session.start == pytest.approx(first - LEAD_IN_S)
    assert at.playing and at.events_applied == 0
    assert at.elapsed_s == pytest.approx(first - LEAD_IN_S)  # the recorded clock, not 0:00
    assert at.total_s == pytest.approx(late[-1].t)
    assert session.timeline.start == session.start
    clock.advance(LEAD_IN_S + 0.01)  # x1: the first event is a second away, not 38
    moved = session.advance()
    assert moved.events_applied >= 1
    assert session.view().servers[0].status == "up"
    assert session.seek_by(-60.0).t == session.start  # Home/back: no earlier than the start


def test_seek_by_clamps_to_the_recording() -> None:
    session, _, _ = _session("healthy.ndjson.gz", playing=False)
    assert session.seek_by(-10.0).t == session.start
    assert session.seek_by(5.0).t == pytest.approx(5.0)
    assert session.seek_by(60.0).t == session.end
    assert session.position().at_end


def test_the_graphs_history_at_the_play_head_is_the_same_played_or_sought() -> None:
    session, clock, recording = _session("demo-cycle.ndjson.gz", playing=True)
    clock.advance(20.5)
    played = session.view().servers[0].history
    assert played.t and played.t[-1] <= 20.5 and len(played.t) > 10
    # the same history when the head is put there by a seek from the end (a rebuild)
    session.seek(session.end)
    assert session.view().servers[0].history.t[-1] > 20.5
    session.seek(20.5)
    assert session.view().servers[0].history == played
    # and it is the server's history after every event up to there
    assert _folded_until(recording, 20.5).view().servers[0].history == played


def test_jumps_go_to_flags_and_markers_in_order() -> None:
    session, _, _ = _session("demo-cycle.ndjson.gz", playing=False)
    jumps = session.timeline.jumps
    flags = list(session.timeline.flags)
    assert len(flags) == 12 == session.timeline.count("flag")  # 9 degraded, 3 transitions
    seen = []
    while (moved := session.jump(1)) is not None:
        seen.append(moved.t)
    assert seen == list(jumps)
    assert set(flags) <= set(jumps)
    assert session.jump(1) is None and session.position().t == jumps[-1]
    back = []
    while (moved := session.jump(-1)) is not None:
        back.append(moved.t)
    assert back == list(reversed(jumps[:-1]))
    # at a flag's time its request is in the rows, and the label says its verdict: r6, the
    # first transition, is still waiting for the slow level there (two answers later it is
    # classed: the verdict every screen counts at the end)
    session.seek(flags[0])
    row = session.view().rows[-1]
    assert row.t_end == flags[0] and row.request_id == "r6" and not row.settled
    assert session.labels_here() == ("transition: r6",)
    session.seek(flags[1])
    row = session.view().rows[-1]
    assert row.request_id == "r7" and row.speed_class is not None
    assert session.labels_here() == ("vanilla speed: r7",)


def test_the_timeline_of_the_cycle_sample() -> None:
    session, _, _ = _session("demo-cycle.ndjson.gz")
    timeline = session.timeline
    assert (timeline.start, timeline.end) == (0.0, session.end)
    assert timeline.cycle_period == 10
    assert len(timeline.phases) == 30
    phases = [p.phase for p in timeline.phases]
    assert phases.count("degraded") == 9 and phases.count("transition") == 3
    flagged = set(timeline.flags)
    degraded_ends = {p.t1 for p in timeline.phases if p.phase == "degraded"}
    transition_ends = {p.t1 for p in timeline.phases if p.phase == "transition"}
    # every degraded request and every transition (r6 too: it waits for the slow level and is
    # classed a transition once it is seen, as its twins r16 and r26), as the table badges them
    assert flagged == degraded_ends | transition_ends
    assert flagged == {r.t_end for r in session.final_view.rows if flagged_row(r)}
    assert all(p.t0 <= p.t1 for p in timeline.phases)


def test_the_timeline_of_the_restart_sample_has_its_counter_reset() -> None:
    session, _, _ = _session("restart.ndjson.gz")
    resets = [t for t in session.timeline.marks if t.kind == "reset"]
    assert len(resets) == 1 and "counters reset" in resets[0].label
    assert session.timeline.count("reset") == 1
    assert session.timeline.phases == () and session.timeline.cycle_period is None
    session.seek(resets[0].t)
    assert session.view().servers[0].counter_resets > 0  # one per counter series that reset
    session.seek(resets[0].t - 0.001)
    assert session.view().servers[0].counter_resets == 0


def test_events_are_folded_in_file_order_even_when_stamped_earlier() -> None:
    # A log line queued on another thread is stamped at push and emitted later: the file order
    # is the live fold's order; such an event is due with the one before it.
    info = SessionInfo(simulated=True)
    events = [
        Marker(1.0, "a"),
        Marker(3.0, "b"),
        ServerLogLine(2.0, "http://s", "late line"),
        Marker(5.0, "c"),
    ]
    session = ReplaySession(
        info, events, lambda: SessionState(info), clock=FakeClock(), playing=False
    )
    session.seek(2.5)
    assert [m.label for m in session.view().markers] == ["a"]
    session.seek(3.0)
    assert session.position().events_applied == 3  # the late line came with "b"
    assert [m.label for m in session.view().markers] == ["a", "b"]
    timeline = session.timeline
    assert [t.label for t in timeline.marks] == ["a", "b", "c"]
    assert {t.kind for t in timeline.marks} == {"marker"}
    assert [t.t for t in timeline.marks] == [1.0, 3.0, 5.0]


@pytest.mark.timeout(30)
def test_seeking_to_a_huge_time_returns() -> None:
    # The reader refuses such times; the session still never loops on them (a second added to
    # 1e308 is 1e308: the graph sampling used to spin there for ever, freezing the screen).
    info = SessionInfo()
    events = [Marker(1.0, "a"), Marker(1e308, "far")]
    session = ReplaySession(
        info, events, lambda: SessionState(info), clock=FakeClock(), playing=False
    )
    assert session.seek(session.end).at_end
    assert [m.label for m in session.view().markers] == ["a", "far"]


def test_an_empty_recording_is_a_zero_length_replay() -> None:
    info = SessionInfo()
    session = ReplaySession(info, [], lambda: SessionState(info), clock=FakeClock())
    position = session.advance()
    assert (position.t, position.end, position.playing) == (0.0, 0.0, False)
    assert session.jump(1) is None
    assert session.view().summary.total == 0


def test_checkpoints_give_the_same_state_and_graphs_as_folding_from_the_start() -> None:
    recording = read_recording(RECORDINGS / "demo-cycle.ndjson.gz")
    info = recording.info

    def session(every: int) -> ReplaySession:
        return ReplaySession(
            info,
            recording.events,
            lambda: SessionState(info),
            clock=FakeClock(),
            playing=False,
            checkpoint_events=every,
        )

    plain, kept = session(10**9), session(100)  # the second keeps a copy every 100 events
    assert len(kept._checkpoints) == len(recording.events) // 100
    for target in (66.0, 64.5, 3.0, 61.2, 62.0, 20.0, 65.0):
        plain.seek(target)
        kept.seek(target)
        assert kept.view() == plain.view()  # the servers' history (the graphs) included
        assert kept.view().servers[0].history.t[-1] <= target
    # every backward seek (64.5, 3, 20 s) folds from a copy made before the target (one exists
    # before 3 s): the copy holds the graphs' history, so no minute of earlier events is folded
    # again, and none folds from the first event
    assert plain.rebuilds == 3 and kept.rebuilds == 0


@pytest.mark.parametrize("name", ["demo-cycle.ndjson.gz", "healthy.ndjson.gz", "restart.ndjson.gz"])
def test_every_event_of_a_sample_is_on_the_session_clock(name: str) -> None:
    # Each event's t is seconds since the session started: a source stamping on another clock
    # (the demo's log lines once carried the raw monotonic clock, hours in) would stretch the
    # timeline and leave the replay idle for hours at the end.
    recording = read_recording(RECORDINGS / name)
    ends = [e.t for e in recording.events if type(e).__name__ == "RequestEnded"]
    last_end = max(ends)
    assert all(0.0 <= e.t <= last_end + 5.0 for e in recording.events)
    session, _, _ = _session(name)
    assert session.end <= last_end + 5.0


@pytest.mark.parametrize("name", ["demo-cycle.ndjson.gz", "demo-cycle.ndjson"])
def test_a_reader_reads_on_from_a_mark_as_it_read_the_first_time(name: str, tmp_path: Path) -> None:
    path = RECORDINGS / "demo-cycle.ndjson.gz"
    if not name.endswith(".gz"):  # the same recording, not compressed
        path = tmp_path / name
        path.write_bytes(gzip.decompress((RECORDINGS / "demo-cycle.ndjson.gz").read_bytes()))
    every = read_recording(path).events
    reader = RecordingReader(path)
    try:
        first = [next(reader) for _ in range(1000)]
        mark = reader.mark()
        rest = list(reader)
        assert first + rest == every
        reader.restart(mark)
        assert list(reader) == rest  # a /metrics scrape is a change of the one before: kept
        reader.restart(mark)  # a mark can be used again
        assert next(reader) == rest[0]
        reader.restart(None)
        assert list(reader) == every
    finally:
        reader.close()


def test_a_session_on_the_file_seeks_as_one_holding_every_event() -> None:
    """The replay screen's session reads the recording file (sparse copies of the state and the
    reader's marks), never a list of its events: every seek shows what the list-fed session
    shows; past MAX_CHECKPOINTS copies every other one is dropped."""
    recording = read_recording(RECORDINGS / "demo-cycle.ndjson.gz")
    info = recording.info
    listed = ReplaySession(
        info, recording.events, lambda: SessionState(info), clock=FakeClock(), playing=False
    )
    reader = RecordingReader(RECORDINGS / "demo-cycle.ndjson.gz")
    read = ReplaySession(
        info,
        reader,
        lambda: SessionState(info),
        clock=FakeClock(),
        playing=False,
        checkpoint_events=100,
        max_checkpoints=8,
    )
    try:
        assert 4 <= len(read._checkpoints) < 8  # 41 copies made, thinned to every 800th event
        assert read.events_total == len(recording.events)
        assert read.final_view == listed.final_view
        for target in (66.0, 64.5, 3.0, 61.2, 62.0, 20.0, 65.0, read.start, read.end):
            listed.seek(target)
            read.seek(target)
            assert read.view() == listed.view()
            assert read.position() == listed.position()
        assert read.rebuilds < listed.rebuilds  # the copies spared folding from the start
    finally:
        read.close()


def test_the_timeline_holds_every_flag_not_only_the_last_500_requests(tmp_path: Path) -> None:
    """The state keeps the last 500 requests' rows; the timeline counted and jumped to the flags
    among those only (125 of 150 here, where --json counts 150). It keeps every flagged
    request's time from its one pass over the recording."""
    path = tmp_path / "long.ndjson"
    slow = cycling_recording(path, 600, chunks=10)  # one request in four at vanilla speed
    port = replay_port(str(path), baseline_tok_s=None, speed=1.0, label="x", clock=FakeClock())
    try:
        timeline = port.timeline
        assert slow == 150
        view_at_end = port.seek(timeline.end) and port.view()
        assert view_at_end.summary.flagged == 150 and len(view_at_end.rows) == 500  # --json's
        assert timeline.count("flag") == len(timeline.flags) == 150
        # every flag is where a vanilla-speed request ended, the first ones among them too
        port.seek(timeline.start)
        assert not port.position().playing  # it stopped at the end
        seen = []
        while (moved := port.jump(1)) is not None:
            seen.append(moved.t)
            row = port.view().rows[-1]
            assert row.t_end == moved.t and row.speed_class is not None
            assert row.speed_class.kind == "vanilla-speed"
            assert port.labels_here() == (f"vanilla speed: {row.request_id}",)
        assert seen == list(timeline.flags)
        assert port.view().rows[-1].request_id == "r599"
        port.seek(timeline.flags[1])
        assert port.jump(-1) is not None and port.position().t == timeline.flags[0]
        assert port.view().rows[-1].request_id == "r3"  # long before the last 500 requests
        assert port.jump(-1) is None  # nothing before the first flag
    finally:
        port.close()


@pytest.mark.slow
def test_opening_a_recording_takes_the_same_memory_whatever_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay screen's loader (`replay_port`) read the whole recording into a list first:
    a 1 GB recording took 4.1 GB. It streams now, folding as it reads, and keeps only sparse
    copies of the state and the reader's marks, so ten times the events take about the same
    peak memory (traced allocations, not time). The session state's own rings are made small
    here so that both recordings fill them: what is left is the loader's own memory."""
    monkeypatch.setitem(SessionState.__init__.__kwdefaults__, "max_requests", 20)
    monkeypatch.setattr(session_state, "MAX_ITL_VALUES", 200)
    monkeypatch.setattr(session_state, "MAX_CYCLE_SPEEDS", 50)

    def peak(requests: int) -> int:
        path = tmp_path / f"r{requests}.ndjson"
        cycling_recording(path, requests)  # 42 events a request
        gc.collect()
        tracemalloc.start()
        try:
            port = replay_port(str(path), baseline_tok_s=None, speed=1.0, label="x")
            port.seek(port.timeline.end)
            port.view()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            port.close()

    small, large = peak(50), peak(500)  # about 2,100 and 21,000 events
    assert large < 2.5 * small  # not 10 times
