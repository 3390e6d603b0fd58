"""Seconds saved per answer (core/diagnosis/seconds_saved.py): hand-computable cases."""

from __future__ import annotations

import pytest

from specmon.core.diagnosis.seconds_saved import SavingsTotals, answer_saving


def test_an_answer_faster_than_vanilla_saved_the_difference() -> None:
    # 101 tokens: 100 decode tokens; vanilla 50 tok/s = 2 s; it took 0.5 s.
    s = answer_saving("a", 1.0, 101, 0.5, 50.0, 4.0)
    assert s is not None
    assert s.vanilla_s == pytest.approx(2.0)
    assert s.saved_s == pytest.approx(1.5)
    assert not s.cost and s.reason is None


def test_an_answer_slower_than_vanilla_cost_time_with_a_reason() -> None:
    s = answer_saving("b", 1.0, 101, 2.5, 50.0, 1.05)
    assert s is not None and s.cost
    assert s.saved_s == pytest.approx(-0.5)
    assert s.reason is not None and "acceptance length 1.05" in s.reason
    judged = answer_saving("c", 1.0, 101, 2.5, 50.0, 1.05, "GPU throttled")
    assert judged is not None and judged.reason == "GPU throttled"


def test_nothing_is_measured_without_a_baseline_or_a_span() -> None:
    assert answer_saving("a", 1.0, 101, 0.5, None, 4.0) is None
    assert answer_saving("a", 1.0, 101, 0.5, 0.0, 4.0) is None
    assert answer_saving("a", 1.0, 1, 0.5, 50.0, 4.0) is None
    assert answer_saving("a", 1.0, 101, None, 50.0, 4.0) is None
    assert answer_saving("a", 1.0, 101, float("inf"), 50.0, 4.0) is None


def test_session_totals_net_the_savings_and_count_the_costly_answers() -> None:
    totals = SavingsTotals()
    for s in (
        answer_saving("a", 1.0, 101, 0.5, 50.0, 4.0),
        answer_saving("b", 2.0, 101, 2.5, 50.0, 1.0),
    ):
        assert s is not None
        totals.add(s)
    view = totals.view(50.0, ())
    assert view.answers == 2 and view.answers_cost == 1
    assert view.saved_s == pytest.approx(1.0)
    assert view.vanilla_s == pytest.approx(4.0) and view.actual_s == pytest.approx(3.0)
