"""The per-request speed class: ok / transition / vanilla-speed against the recent speed levels."""

from __future__ import annotations

import pytest
from tests.support.session_feed import SRC, request_events

from specmon.core.detectors.speed_class import (
    SpeedLevels,
    at_change_of_level,
    level_of,
    speed_class,
    speed_levels,
    waiting,
)
from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import SpeedClassView, VanillaView

SEED = [221.0, 214.0, 218.0, 222.0, 230.0, 103.0, 59.0, 62.0, 62.0, 212.0]
"""The seed's sequence: 5 fast, 1 transition, 3 degraded, 1 recovery."""

OK = VanillaView(flagged=False, judged=True)


def _kinds(speeds: list[float]) -> list[str | None]:
    levels = speed_levels(speeds)
    out = []
    for s in speeds:
        c = speed_class(s, OK, levels)
        out.append(c.kind if c else None)
    return out


def test_the_seeds_sequence_has_one_transition_and_three_at_the_slow_level() -> None:
    kinds = _kinds(SEED)
    assert kinds[5] == "transition"  # 103 tok/s between ~218 and ~62
    assert kinds[6:9] == ["vanilla-speed"] * 3
    assert kinds[:5] == ["ok"] * 5 and kinds[9] == "ok"


def test_levels_are_the_medians_of_the_fast_and_slow_requests() -> None:
    levels = speed_levels(SEED)
    assert levels is not None
    assert (levels.fast_tok_s, levels.slow_tok_s) == (219.5, 62.0)
    # fast 221, 214, 218, 222, 230, 212: deviations from 219.5 of 1.5, 5.5, 1.5, 2.5, 10.5, 7.5
    assert levels.fast_spread == pytest.approx(1.4826 * 4.0)
    assert levels.slow_spread == 0.0  # 59, 62, 62 around 62: MAD 0


def test_a_fast_answer_within_the_fast_levels_spread_is_fast() -> None:
    # A chat's fast answers vary with their content: 150 tok/s among 190-240 is one of them (H -
    # 3 spreads), not a transition (H - G/4 = 169 would say so); 110 stays a transition.
    fast = [204.0, 193.0, 211.0, 237.0, 221.0, 195.0, 230.0, 180.0]
    levels = speed_levels([*fast, 60.0, 61.0, 59.0, 60.0])
    assert levels is not None and levels.fast_at < 150.0 < levels.fast_tok_s - 36.0
    assert speed_class(150.0, OK, levels) == SpeedClassView(
        "ok", (), levels.fast_tok_s, levels.slow_tok_s
    )
    c = speed_class(110.0, OK, levels)
    assert c is not None and c.kind == "transition"
    assert SpeedLevels(200.0, 60.0, fast_spread=100.0).fast_at == 130.0  # never past the midpoint


def test_the_issues_112_between_205_and_60_is_a_transition_with_its_reason() -> None:
    levels = speed_levels([205.0, 208.0, 203.0, 112.0, 60.0, 61.0, 59.0, 206.0])
    c = speed_class(112.0, OK, levels)
    assert c is not None and c.kind == "transition"
    assert c.reasons[0][0] == "between_levels"
    assert "112 tok/s" in c.reasons[0][1]


def test_one_steady_level_is_ok_even_with_noise() -> None:
    speeds = [221.0, 214.0, 218.0, 222.0, 230.0, 212.0, 209.0, 225.0]
    assert speed_levels(speeds) is None
    assert set(_kinds(speeds)) == {"ok"}


def test_one_request_far_above_the_rest_is_an_outlier_not_a_fast_level() -> None:
    # `specmon demo --speed 50 --max-tokens 32`: the first answer was read in one burst
    # (106,069 tok/s); taken as the fast level it put four fast answers "at the slow level".
    speeds = [106069.0, 21982.0, 10538.0, 10243.0, 6909.0, 4823.0, 2728.0, 3030.0, 3401.0]
    assert speed_levels(speeds) is None
    assert "vanilla-speed" not in _kinds(speeds)


def test_too_few_requests_give_no_levels() -> None:
    assert speed_levels([220.0, 60.0, 61.0]) is None


def test_the_vanilla_verdict_wins_and_keeps_its_reasons() -> None:
    flagged = VanillaView(flagged=True, judged=True, reasons=(("acceptance_near_zero", "AL 1.02"),))
    c = speed_class(215.0, flagged, speed_levels(SEED))
    assert c is not None and c.kind == "vanilla-speed"
    assert c.reasons == (("acceptance_near_zero", "AL 1.02"),)


def test_no_speed_and_no_flag_is_no_class() -> None:
    assert speed_class(None, OK, speed_levels(SEED)) is None


def test_only_the_recent_window_sets_the_levels() -> None:
    old_cycle = SEED * 3
    steady = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0]
    assert speed_levels(old_cycle + steady, window=len(steady)) is None
    assert speed_levels(old_cycle + steady, window=len(old_cycle)) is not None


@pytest.mark.parametrize("speed", [103.0, 112.0, 150.0])
def test_speeds_between_the_thresholds_are_transitions(speed: float) -> None:
    c = speed_class(speed, OK, speed_levels(SEED))
    assert c is not None and c.kind == "transition"


def test_the_session_view_carries_each_rows_speed_class() -> None:
    state = SessionState(SessionInfo(server=SRC, model="tiny", n_spec=4))
    t = 0.0
    for i, speed in enumerate(SEED):
        # 50 chunks of n tokens: decode tok/s = 50 n / (50 * step) = speed; the degraded
        # answers' drafts are refused (AL 1), the transition's half accepted (AL 2)
        n = 4 if speed > 150 else 2 if speed > 80 else 1
        for e in request_events(f"r{i}", t, tokens_per_step=n, steps=50, step_s=n / speed):
            state.apply(e)
        t += 10.0
    rows = state.view().rows
    assert [round(r.decode_tok_s or 0) for r in rows] == [round(s) for s in SEED]
    kinds = [r.speed_class.kind if r.speed_class else None for r in rows]
    assert kinds[5] == "transition"
    assert kinds[0] == "ok" and kinds[9] == "ok"
    assert kinds[6] == "vanilla-speed"


def test_an_answer_far_above_a_tight_slow_level_is_a_transition() -> None:
    # The drift demo at speed 8: fast answers 1,400-2,100 tok/s, degraded ones 477-486; r36 at
    # 787 tok/s and AL 1.7 (as its twins r6, r16, r26 at 820-907) is between, not slow (a fixed
    # quarter of the gap put the slow level's edge at about 800).
    fast = [1677.0, 1901.0, 1624.0, 1583.0, 2098.0, 1735.0, 1895.0, 1721.0, 1793.0, 1761.0]
    fast += [1847.0, 1775.0]  # median 1768: a quarter of the gap above 480 is 802
    slow = [480.0, 479.0, 482.0, 479.0, 477.0, 484.0, 479.0, 479.0, 486.0]
    levels = speed_levels([*fast, *slow])
    assert levels is not None
    c = speed_class(787.0, OK, levels)
    assert c is not None and c.kind == "transition"
    c = speed_class(520.0, OK, levels)
    assert c is not None and c.kind == "vanilla-speed"


def test_a_speed_is_classed_at_the_reference_clock_and_told_at_its_own():
    # Levels kept at the cool GPU's clock (fast 1720, slow 480 tok/s); an answer on the GPU
    # throttled to 1365 of 1725 MHz (scale 1.264) at 1200 tok/s is a fast answer, and one at
    # 380 tok/s is at the slow level, each told against the levels at its own clock.
    levels = SpeedLevels(1720.0, 480.0, fast_spread=120.0, slow_spread=2.0)
    ok = VanillaView(flagged=False, judged=True)
    fast = speed_class(1200.0, ok, levels, clock_scale=1725 / 1365)
    assert fast is not None and fast.kind == "ok"
    assert fast.fast_level_tok_s == pytest.approx(1720.0 * 1365 / 1725)
    slow = speed_class(380.0, ok, levels, clock_scale=1725 / 1365)
    assert slow is not None and slow.kind == "vanilla-speed"
    assert "slow requests ≈380 against fast ones ≈1361 tok/s" in slow.reasons[0][1]
    assert speed_class(1200.0, ok, levels).kind == "transition"  # type: ignore[union-attr]


def test_an_answer_at_the_slow_level_with_healthy_acceptance_is_not_vanilla_speed() -> None:
    # A real server streams in bursts: an answer whose every draft was accepted (AL 5.0, as the
    # fast answers' 5.0) can land at the slow level's tok/s. Speculation did not fail on it.
    speeds = [1400.0, 1390.0, 1410.0, 1405.0, 300.0, 310.0, 305.0, 1395.0]
    als = [5.0, 5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 5.0]
    levels = speed_levels(speeds, als=als)
    assert levels is not None and levels.fast_al == 5.0
    healthy = speed_class(305.0, OK, levels, al=5.0)
    assert healthy is not None and healthy.kind == "ok"
    assert [code for code, _ in healthy.reasons] == ["slow_healthy_acceptance"]
    # The same speed with acceptance that fell (AL 1.0, or 3.0 < 70% of 5.0) is vanilla speed;
    # and so is one whose AL is not known.
    for al in (1.0, 3.0, None):
        c = speed_class(305.0, OK, levels, al=al)
        assert c is not None and c.kind == "vanilla-speed"


def test_the_session_leaves_slow_answers_with_healthy_acceptance_unflagged() -> None:
    # Every answer accepts 3 drafts a step (AL 4), the slow ones too: they are slow for another
    # reason than speculation (bursts, load) and are not badged VANILLA SPEED.
    state = SessionState(SessionInfo(server=SRC, model="tiny", n_spec=4))
    t = 0.0
    for i, speed in enumerate(SEED):
        for e in request_events(f"r{i}", t, tokens_per_step=4, steps=50, step_s=4.0 / speed):
            state.apply(e)
        t += 10.0
    rows = state.view().rows
    for row in rows[6:9]:
        assert row.speed_class is not None and row.speed_class.kind == "ok"
        assert [code for code, _ in row.speed_class.reasons] == ["slow_healthy_acceptance"]


def test_a_cycle_on_a_drifting_fast_level_badges_no_fast_answer_a_transition() -> None:
    # The seeds' period-10 cycle over a steady slow level (480 tok/s) on a fast level that
    # halves linearly from answer 5 to answer 25 (acceptance falling as the context grows past
    # a cliff: 1600 to 800 tok/s), then stays. The session's levels (the last 40 answers) put
    # the fast answers of the slide between 1600 and 480: before, answers 9-12 (fast) were
    # badged TRANSITION. Judged among their neighbours (step 6) they are ok; the first
    # transition stays one. (A fast level that halves linearly over all 40 answers left these
    # badges right before too: only the cycle detector lost it, tests/unit/test_cycle.py.)
    speeds = []
    for i in range(40):
        fast = 1600.0 if i < 5 else 800.0 if i >= 25 else 1600.0 * (1 - 0.5 * (i - 5) / 20)
        phase = i % 10
        speeds.append((fast + 480.0) / 2 if phase == 5 else 480.0 if phase in (6, 7, 8) else fast)
    state = SessionState(SessionInfo(server=SRC, model="tiny", n_spec=4))
    t = 0.0
    for i, speed in enumerate(speeds):
        n = 1 if speed == 480.0 else 2 if i % 10 == 5 else 4
        for e in request_events(f"r{i}", t, tokens_per_step=n, steps=50, step_s=n / speed):
            state.apply(e)
        t += 10.0
    rows = state.view().rows
    kinds = [r.speed_class.kind if r.speed_class else None for r in rows]
    fast = [kinds[i] for i in range(40) if i % 10 in (0, 1, 2, 3, 4, 9)]
    assert fast == ["ok"] * len(fast)
    assert kinds[5] == "transition"
    assert all(kinds[i] == "vanilla-speed" for i in range(40) if i % 10 in (6, 7, 8))
    assert rows[9].settled  # judged once its 5 later answers were known


def _session_kinds(speeds: list[float], als: list[int]) -> list[tuple[str | None, str | None]]:
    """Each answer's (kind, first reason) at the end of a session of answers at these decode
    speeds, each accepting als[i] - 1 drafts a step (AL als[i])."""
    state = SessionState(SessionInfo(server=SRC, model="tiny", n_spec=4))
    t = 0.0
    for i, (speed, n) in enumerate(zip(speeds, als, strict=True)):
        for e in request_events(f"r{i}", t, tokens_per_step=n, steps=50, step_s=n / speed):
            state.apply(e)
        t += 10.0
    return [
        (
            r.speed_class.kind if r.speed_class else None,
            r.speed_class.reasons[0][0] if r.speed_class and r.speed_class.reasons else None,
        )
        for r in state.view().rows
    ]


def test_a_slower_answer_among_fast_ones_is_no_transition() -> None:
    # A real engine with a learned drafter: the speed of an answer follows its own acceptance,
    # which varies with its text. After a degraded phase (3 answers at 60 tok/s), the fast
    # answers of one engine state and, among them, one whose text is less predictable (AL 2,
    # 120 tok/s). Its speed is between the levels, but the answers before and after it are at
    # the fast level: the engine's state did not change there. Before, it was badged TRANSITION
    # (and kept as one among its neighbours, the slow answers among them).
    speeds = [221.0, 214.0, 218.0, 59.0, 62.0, 62.0, 212.0, 219.0, 224.0, 120.0, 216.0, 222.0]
    als = [4, 4, 4, 1, 1, 1, 4, 4, 4, 2, 4, 4]
    kinds = _session_kinds(speeds, als)
    assert kinds[9] == ("ok", "no_change_of_level")
    assert [k for k, _ in kinds] == ["ok"] * 3 + ["vanilla-speed"] * 3 + ["ok"] * 6


def test_a_transition_at_a_change_of_level_stays_one() -> None:
    # The seeds' cycle: the answer between the fast answers and the slow ones is a transition.
    kinds = _session_kinds(SEED + SEED, [4, 4, 4, 4, 4, 2, 1, 1, 1, 4] * 2)
    assert [i for i, (k, _) in enumerate(kinds) if k == "transition"] == [5, 15]


def test_a_between_answer_is_shown_ok_until_an_answer_after_it_is_at_a_level() -> None:
    # The last answer is between the levels, and nothing after it is known yet: it is not
    # known to be at a change of level, so it is not badged TRANSITION (before: it was, at once).
    speeds = [221.0, 214.0, 218.0, 59.0, 62.0, 62.0, 212.0, 219.0, 224.0, 120.0]
    kinds = _session_kinds(speeds, [4, 4, 4, 1, 1, 1, 4, 4, 4, 2])
    assert kinds[9] == ("ok", "between_levels_waiting")
    # the next answer is at the slow level: now it is a transition (fast before, slow after)
    kinds = _session_kinds([*speeds, 61.0], [4, 4, 4, 1, 1, 1, 4, 4, 4, 2, 1])
    assert kinds[9] == ("transition", "between_levels")


LEVELS = SpeedLevels(219.0, 62.0, fast_spread=4.0, slow_spread=1.0)
BETWEEN = SpeedClassView("transition", (("between_levels", "between"),), 219.0, 62.0)


@pytest.mark.parametrize(
    ("after", "kind"),
    [
        ([61.0], "transition"),  # fast before, slow after: a change of level
        ([110.0, 61.0], "transition"),  # answers between the levels are passed over
        ([220.0], "ok"),  # fast before and after: the answer's own text
        ([110.0, 115.0, 120.0], "ok"),  # no answer after it at a level within 3
        ([], None),  # not known yet
        ([110.0, 115.0], None),
    ],
)
def test_a_transition_needs_a_change_of_level_around_it(
    after: list[float], kind: str | None
) -> None:
    speeds = [62.0, 220.0, 218.0, 120.0, *after]
    judged = at_change_of_level(BETWEEN, speeds, 3, LEVELS)
    assert (judged.kind if judged else None) == kind
    if kind == "ok" and judged is not None:
        assert [code for code, _ in judged.reasons] == ["no_change_of_level"]


def test_a_between_answer_with_no_level_before_it_is_no_transition() -> None:
    judged = at_change_of_level(BETWEEN, [120.0, 61.0], 0, LEVELS)
    assert judged is not None and judged.kind == "ok"
    assert waiting(BETWEEN).kind == "ok"
    assert level_of(219.0, LEVELS) == "fast" and level_of(62.0, LEVELS) == "degraded"
    assert level_of(140.0, LEVELS) is None
