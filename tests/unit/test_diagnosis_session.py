"""The diagnosis fold inside the session state: fed by events, in the view and in
`watch --json`, and the same when the events are folded again (replay recomputes it)."""

from __future__ import annotations

import json

import pytest
from tests.support.diagnosis_feed import answer, gpu

from specmon.core.events import Event, SessionInfo
from specmon.core.session_state import SessionState


def _fold(events: list[Event], baseline: float | None = None) -> SessionState:
    state = SessionState(SessionInfo(n_spec=4), baseline_tok_s=baseline)
    for e in events:
        state.apply(e)
    return state


def _day(throttle: bool) -> list[Event]:
    events: list[Event] = []
    t = 0.0
    for i in range(20):
        slow = throttle and i >= 15
        clock = 1365.0 if slow else 1725.0
        step = 0.02 * 1725.0 / clock
        events.append(gpu(t, clock, 91.0 if slow else 60.0))
        # Long answers: 40 steps of 3 tokens (AL 3) at a context that starts at 100 tokens.
        events += answer(f"r{i}", t, prompt_tokens=100, step_tokens=[3] * 40, step_s=step)
        t += 2.0
    return events


def test_the_session_view_carries_every_analysis() -> None:
    state = _fold(_day(throttle=True), baseline=60.0)
    d = state.view().diagnosis
    assert d is not None
    assert d.context.steps == 20 * 40 and d.context.bins[0].acceptance_length == 3.0
    assert d.thermal.slow and d.thermal.cause == "clock"
    assert "1725→1365 MHz at 91 °C" in d.thermal.summary
    assert d.thermal.power_limits[0].requested_w == 700.0
    assert d.thermal.power_limits[0].enforced_w == 600.0 and d.thermal.power_limits[0].differs
    # AL 3 at 20 ms steps: 150 tok/s against 60 vanilla: every answer saved time.
    assert d.seconds_saved.answers == 20 and d.seconds_saved.answers_cost == 0
    assert d.seconds_saved.saved_s > 0
    assert d.quality.checked == 0  # 121-token answers are under the sentinel's minimum


def test_a_plain_session_has_no_slowdown() -> None:
    d = _fold(_day(throttle=False), baseline=60.0).view().diagnosis
    assert d is not None and not d.thermal.slow


def test_without_a_baseline_nothing_is_saved_or_cost() -> None:
    d = _fold(_day(throttle=False)).view().diagnosis
    assert d is not None and d.seconds_saved.answers == 0
    assert d.seconds_saved.baseline_tok_s is None


def test_watch_json_has_the_diagnosis_and_replay_gives_the_same() -> None:
    events = _day(throttle=True)
    first = _fold(events, baseline=60.0).snapshot()
    again = _fold(events, baseline=60.0).snapshot()
    assert first["diagnosis"] == again["diagnosis"]
    d = json.loads(json.dumps(first, allow_nan=False))["diagnosis"]
    assert set(d) == {"context", "thermal", "seconds_saved", "quality"}
    assert d["thermal"]["cause"] == "clock"
    assert d["seconds_saved"]["saved_s"] == pytest.approx(
        first["diagnosis"]["seconds_saved"]["saved_s"]
    )


def test_a_looping_answer_is_flagged_in_the_session() -> None:
    events: list[Event] = []
    for i in range(10):  # the usual: AL ~3 over varied text
        events += answer(
            f"ok{i}",
            i * 5.0,
            prompt_tokens=50,
            step_tokens=[3, 2, 4] * 50,
            step_s=0.02,
            words=[f"w{i}_{j}" for j in range(500)],
        )
    events += answer(
        "loop", 60.0, prompt_tokens=50, step_tokens=[5] * 80, step_s=0.02, words=["a", "b", "c"]
    )
    q = _fold(events).view().diagnosis
    assert q is not None
    assert q.quality.loops == 1 and q.quality.flagged[-1].request_id == "loop"
    assert q.quality.garbled == 0


def test_a_recording_round_trip_replays_the_same_diagnosis() -> None:
    # The analyses are derived from recorded events only: encode, decode, fold again.
    from specmon.core.recording_format import EventDecoder, EventEncoder

    events = _day(throttle=True)
    encoder, decoder = EventEncoder(), EventDecoder()
    replayed = [decoder.decode(json.loads(json.dumps(encoder.encode(e)))) for e in events]
    assert all(e is not None for e in replayed)
    live = _fold(events, baseline=60.0).snapshot()["diagnosis"]
    again = _fold([e for e in replayed if e is not None], baseline=60.0).snapshot()["diagnosis"]
    assert again == live
    assert again["thermal"]["power_limits"][0]["requested_w"] == 700.0
