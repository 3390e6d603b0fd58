"""The diagnosis fold keeps fixed-size state: rings and text tails are capped whatever the
session length (the day-long measurement is benchmarks/day_of_events.py)."""

from __future__ import annotations

from tests.support.diagnosis_feed import answer
from tests.support.retained import session_retained

from specmon.core.diagnosis import state as dstate
from specmon.core.diagnosis.quality import MAX_TEXT_CHARS
from specmon.core.diagnosis.thermal import MAX_POINTS
from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState


def test_a_running_answers_text_keeps_only_its_tail() -> None:
    d = dstate.Diagnosis()
    for i in range(5000):
        d.text("r", f"{i:05d} ")
    kept = "".join(d.texts["r"])
    assert len(kept) <= 2 * MAX_TEXT_CHARS
    assert kept.endswith("04999 ")


def test_texts_of_answers_that_never_end_are_capped() -> None:
    d = dstate.Diagnosis()
    for i in range(dstate.MAX_TEXTS + 50):
        d.text(f"r{i}", "x")
    assert len(d.texts) == dstate.MAX_TEXTS
    assert "r0" not in d.texts and f"r{dstate.MAX_TEXTS + 49}" in d.texts


def test_many_answers_leave_bounded_rings() -> None:
    state = SessionState(SessionInfo(n_spec=4), baseline_tok_s=50.0, max_requests=10)
    for i in range(MAX_POINTS + 200):
        for e in answer(f"r{i}", i * 2.0, prompt_tokens=100, step_tokens=[3] * 5, step_s=0.02):
            state.apply(e)
    d = state.view().diagnosis
    assert d is not None
    assert d.thermal.answers == MAX_POINTS
    assert len(d.seconds_saved.recent) == dstate.MAX_RECENT_SAVINGS
    assert d.seconds_saved.answers == MAX_POINTS + 200  # the totals count every answer
    assert session_retained(state)["diagnosis"] == MAX_POINTS + dstate.MAX_RECENT_SAVINGS
