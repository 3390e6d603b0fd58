"""The verdict scorer's arithmetic on tiny hand-made cases (benchmarks/verdicts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks import verdicts
from benchmarks.verdicts import Counts, near_change, observed_period, read_truth


def test_counts_precision_recall_false_alarms_by_hand() -> None:
    # 10 answers: 3 truly positive; flagged: 2 of them and 1 negative.
    # TP 2, FP 1, FN 1: precision 2/3, recall 2/3, false alarms 1 per 10 = 10 per 100.
    c = Counts()
    for truth, flagged in [
        (True, True),
        (True, True),
        (True, False),
        (False, True),
        *[(False, False)] * 6,
    ]:
        c.add(truth=truth, flagged=flagged)
    assert (c.answers, c.tp, c.fp, c.fn) == (10, 2, 1, 1)
    assert c.positives == 3 and c.flagged == 3
    assert c.precision == pytest.approx(2 / 3)
    assert c.recall == pytest.approx(2 / 3)
    assert c.false_alarms_per_100 == pytest.approx(10.0)


def test_counts_without_flags_or_positives_have_no_ratio() -> None:
    c = Counts()
    c.add(truth=False, flagged=False)
    assert c.precision is None and c.recall is None
    assert c.false_alarms_per_100 == 0.0
    merged = c.merged(Counts(answers=4, tp=1, fp=1, fn=2))
    assert (merged.answers, merged.tp, merged.fp, merged.fn) == (5, 1, 1, 2)
    assert merged.recall == pytest.approx(1 / 3)


def test_near_change_is_within_one_answer_of_a_change_of_state() -> None:
    levels = ["fast"] * 5 + ["slow"] * 3 + ["fast"] * 5
    # changes between 4|5 and 7|8: answers 3..6 and 6..9 are within one answer
    near = [i for i in range(len(levels)) if near_change(levels, i)]
    assert near == [3, 4, 5, 6, 7, 8, 9]


def test_observed_period_of_the_seeds_cycle_and_of_none() -> None:
    seeds = ([False] * 6 + [True] * 3 + [False]) * 4
    assert observed_period(seeds) == 10
    assert observed_period([False] * 30) is None
    assert observed_period([True] * 30) is None


def _truth(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_read_truth_and_a_bad_line(tmp_path: Path) -> None:
    good = _truth(
        tmp_path / "t.jsonl",
        [
            {"kind": "session", "cycle_period": 10},
            {"kind": "request", "request_id": "r1", "state": "fast"},
            {"kind": "restart", "n": 2, "t": 1.0},
        ],
    )
    session, requests, restarts = read_truth(good)
    assert session["cycle_period"] == 10
    assert requests["r1"]["state"] == "fast"
    assert restarts == [{"kind": "restart", "n": 2, "t": 1.0}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "session"}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        read_truth(bad)


def test_targets_name_what_is_missed() -> None:
    score = verdicts.ScenarioScore("s", "tuning", answers=10, unmatched=0)
    score.requests = {v: Counts() for v in verdicts.REQUEST_VERDICTS}
    score.requests["vanilla-speed"] = Counts(answers=10, tp=3, fp=1, fn=0)  # precision 0.75
    score.requests["loop"] = Counts(answers=10, tp=2, fp=0, fn=0)
    score.sessions["cycle"] = verdicts.SessionVerdict(None, True, 5, False)
    missed = verdicts.target_failures([score])
    assert any(m.startswith("vanilla-speed precision 0.750") for m in missed)
    assert any(m.startswith("s: cycle: truth None, found True, value 5") for m in missed)
    assert not any(m.startswith("loop") for m in missed)


def test_a_loop_at_vanilla_speed_is_scored_by_the_badge_it_shows() -> None:
    # A loop served in a degraded phase: its speed class says vanilla speed, but every screen
    # shows LOOP (quality before speed), so it is no vanilla-speed badge.
    import dataclasses

    from tests.support.session_feed import SRC, request_events

    from specmon.core.events import SessionInfo
    from specmon.core.session_state import SessionState
    from specmon.core.views import SpeedClassView

    state = SessionState(SessionInfo(server=SRC, n_spec=4))
    for e in request_events("r1", 0.0, tokens_per_step=1, steps=10, step_s=0.01):
        state.apply(e)
    row = state.view().rows[-1]
    slow = SpeedClassView("vanilla-speed", (("slow_level", "at the recent slow level"),))
    assert verdicts.shown_badge(dataclasses.replace(row, speed_class=slow)) == "vanilla-speed"
    looped = dataclasses.replace(row, speed_class=slow, quality="loop", quality_evidence="x")
    assert verdicts.shown_badge(looped) == "loop"
