"""The cycle detector: the seed's sequence, generated periodic sequences, cycles whose spacing
varies by a request or two, and aperiodic input (generators in cycle_sequences.py)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.cycle_sequences import (
    SEED_CYCLE,
    aperiodic,
    aperiodic_of_kind,
    isolated_dips,
    jittered,
    with_stray_dip,
)

from specmon.core.detectors.cycle import (
    FALSE_POSITIVE_BOUND,
    MIN_SPACED_EPISODES,
    STRAY_EPISODES_PER,
    detect_cycle,
    max_spread,
)


def test_the_seed_sequence():
    r = detect_cycle(SEED_CYCLE * 3)
    assert r is not None
    assert r.period == 10
    assert r.cycles == 3
    assert r.transitions_per_cycle == 1
    assert r.degraded_per_cycle == 3
    assert r.recoveries_per_cycle == 1
    assert r.fast_per_cycle == 5
    assert r.fast_mean == pytest.approx(221, abs=1)
    assert r.long_run_mean == pytest.approx(160, abs=1)
    assert r.share_degraded == pytest.approx(0.3)
    assert (r.period_min, r.period_max, r.period_mean) == (10, 10, 10.0)
    assert r.episodes == 3
    assert r.period_text == "every 10 requests"


def test_the_seed_sequence_from_any_phase():
    seq = (SEED_CYCLE * 4)[4:34]
    r = detect_cycle(seq)
    assert r is not None and r.period == 10


def test_steady_speeds_have_no_cycle():
    assert detect_cycle([221, 214, 218, 222, 230, 219, 225, 216] * 5) is None
    assert detect_cycle([]) is None
    assert detect_cycle([100.0] * 30) is None


def test_two_cycles_are_not_enough():
    assert detect_cycle(SEED_CYCLE * 2) is None


@given(
    period=st.integers(3, 15),
    data=st.data(),
    repeats=st.integers(3, 6),
    high=st.floats(80, 400),
    drop=st.floats(0.35, 0.8),
    noise=st.floats(0.0, 0.08),
    seed=st.integers(0, 2**32),
    transition=st.booleans(),
)
def test_property_generated_cycles(period, data, repeats, high, drop, noise, seed, transition):
    """Period P, D degraded (duty), optional transition point, bounded noise up to 8% of the gap:
    detected with the exact period and counts."""
    rng = random.Random(seed)
    degraded = data.draw(st.integers(1, period - 1 - transition))
    low = high * (1 - drop)
    gap = high - low
    pattern = [high] * (period - degraded - transition)
    if transition:
        pattern.append((high + low) / 2)
    pattern += [low] * degraded
    seq = [x + rng.uniform(-noise, noise) * gap for x in pattern * repeats]
    r = detect_cycle(seq)
    assert r is not None
    assert r.period == period
    assert r.degraded_per_cycle == degraded
    assert r.transitions_per_cycle == transition
    assert r.long_run_mean == pytest.approx(sum(seq) / len(seq))
    assert r.share_degraded == pytest.approx(degraded / period)
    assert r.period_min == r.period_max == period
    assert r.episodes == repeats


def test_transitions_just_above_the_middle_are_not_taken_for_the_degraded_level():
    """Hypothesis found it: period 11 with one transition at the midpoint (+3 from noise) and one
    degraded point; the first split's low cluster held both, its median sat between them and the
    refinement kept the transitions as degraded, one level too wide to be a level."""
    fast = [82.8, 82.7, 78.8, 80.4, 83.1, 78.1, 80.3, 79.5, 82.3]
    seq = [*fast, 57.3, 39.4, *fast, 57.1, 40.3, *fast, 57.4, 43.1]
    r = detect_cycle(seq)
    assert r is not None
    assert (r.period, r.degraded_per_cycle, r.transitions_per_cycle) == (11, 1, 1)


@pytest.mark.slow
def test_false_positive_rate_on_aperiodic_input_is_within_the_stated_bound():
    # The same 20,000 sequences as every earlier measurement (seed and generator unchanged).
    rng = random.Random(20261122)
    trials = 20_000
    hits = sum(detect_cycle(aperiodic(rng)) is not None for _ in range(trials))
    assert hits / trials <= FALSE_POSITIVE_BOUND


# Per-request decode tok/s from `specmon demo --speed 10` (cycle:5f,1t,3d,1r): the fast phase
# varies by about ±15% with the answer's content, far more than in the seed's run.
DEMO_SPEEDS = [2157, 2396, 2058, 1936, 2079, 1128, 600, 600, 601, 2024]
DEMO_SPEEDS += [2521, 2197, 2411, 2179, 2206, 1027, 600, 601, 602, 1857]
DEMO_SPEEDS += [1907, 1784, 2298, 2411, 2054, 1139, 602, 601, 601, 1952]


def test_the_simulated_demo_sequence():
    r = detect_cycle(DEMO_SPEEDS)
    assert r is not None
    assert r.period == 10
    assert r.transitions_per_cycle == 1
    assert r.degraded_per_cycle == 3
    assert r.recoveries_per_cycle == 1


# ------------------------------------------------------------- cycles whose spacing varies


def test_an_extra_fast_request_inside_one_cycle():
    """The case of docs/definitions.md, "Cycle detector": the seed's ten speeds four times, one more
    fast request in the second cycle's fast phase. Episodes start at 5, 15, 26, 36: every 10-11
    requests."""
    seq = SEED_CYCLE * 4
    seq.insert(12, 220)
    r = detect_cycle(seq)
    assert r is not None
    assert (r.period_min, r.period_max) == (10, 11)
    assert r.period_mean == pytest.approx(31 / 3)
    assert r.period == 10
    assert r.period_text == "every 10-11 requests"
    assert r.episodes == 4
    assert r.cycles == 3  # complete cycles between the first and the last episode start
    assert r.transitions_per_cycle == 1
    assert r.degraded_per_cycle == 3
    assert r.recoveries_per_cycle == 1
    assert r.fast_per_cycle == pytest.approx(16 / 3)
    assert r.share_degraded == pytest.approx(12 / 41)
    assert r.fast_mean == pytest.approx(221, abs=1)
    assert r.long_run_mean == pytest.approx(sum(seq) / 41)


def test_one_fast_request_fewer_is_every_9_to_10():
    seq = SEED_CYCLE * 4
    del seq[22]  # a fast request of the third cycle
    r = detect_cycle(seq)
    assert r is not None
    assert r.period_text == "every 9-10 requests"
    assert (r.period_min, r.period_max, r.episodes) == (9, 10, 4)


@pytest.mark.parametrize("where", range(41))
def test_the_extra_request_anywhere(where):
    """Wherever the extra fast request lands (fast phase, between transition and degraded
    requests, inside the degraded phase), the four episodes are found, 10 or 10-11 apart."""
    seq = SEED_CYCLE * 4
    seq.insert(where, 220)
    r = detect_cycle(seq)
    assert r is not None
    assert r.episodes == 4
    assert r.period == 10
    assert (r.period_min, r.period_max) in ((10, 10), (10, 11))


def test_the_simulated_demo_sequence_with_an_extra_request():
    # The demo's run (fast phase ±15%), a fourth cycle, and one more fast request in the third.
    seq = DEMO_SPEEDS + DEMO_SPEEDS[:10]
    seq.insert(22, 2100)
    r = detect_cycle(seq)
    assert r is not None
    assert r.period_text == "every 10-11 requests"
    assert (r.episodes, r.cycles) == (4, 3)
    assert (r.transitions_per_cycle, r.degraded_per_cycle, r.recoveries_per_cycle) == (1, 3, 1)


def test_three_episodes_with_varying_spacing_are_not_enough():
    """Two spacings that agree by chance are common on random input (with 3 episodes the
    aperiodic false-positive rate was 0.59%, over the bound, and isolated dips 0.39%); a cycle
    whose spacing varies needs MIN_SPACED_EPISODES = 4 episodes whose start was seen."""
    assert MIN_SPACED_EPISODES == 4
    seq = SEED_CYCLE * 3
    seq.insert(12, 220)
    assert detect_cycle(seq) is None
    seq = SEED_CYCLE * 4
    seq.insert(12, 220)
    assert detect_cycle(seq[:37]) is None  # the fourth episode: only its transition so far
    assert detect_cycle(seq[:38]) is not None  # and its first degraded request


def test_spacing_that_varies_too_much_is_not_a_cycle():
    # Episodes 10, 13 and 10 requests apart: a spread of 3 is more than a request or two.
    seq = SEED_CYCLE * 4
    seq[12:12] = [220, 219, 221]
    assert detect_cycle(seq) is None


def test_a_cycle_that_stopped_is_not_reported_as_varying():
    # Four seed cycles, then 30 fast requests: the episodes no longer cover the window, and the
    # spacing path requires them to (the exact path still reports the stopped cycle as before).
    seq = SEED_CYCLE * 4
    seq.insert(12, 220)
    assert detect_cycle(seq + [220.0] * 30) is None


def test_isolated_one_off_dips_are_not_a_cycle():
    steady = [221, 214, 218, 222, 230, 219, 225, 216, 224, 220] * 6
    for at in (3, 17, 24, 41, 52):  # slow requests at no regular spacing
        steady[at] = 60
    assert detect_cycle(steady) is None
    rng = random.Random(20261123)
    trials = 5_000
    hits = sum(detect_cycle(isolated_dips(rng)) is not None for _ in range(trials))
    assert hits / trials <= FALSE_POSITIVE_BOUND


@given(
    period_min=st.integers(5, 15),
    data=st.data(),
    cycles=st.integers(5, 8),
    transition=st.booleans(),
    degraded_jitter=st.booleans(),
    high=st.floats(80, 400),
    drop=st.floats(0.35, 0.85),
    seed=st.integers(0, 2**32),
)
def test_property_jittered_cycles(
    period_min, data, cycles, transition, degraded_jitter, high, drop, seed
):
    """Cycles of period_min to period_min + spread requests (spread 1, or 2 from period 8 on),
    the fast phase varying by up to ±15% of its speed (and at most 18% of the gap between the
    levels: ±13% at the seed's drop of 72%), the degraded phase by up to 8% of the gap, the
    window starting anywhere in a cycle: found with the generated period range, episode count
    and share degraded."""
    spread = data.draw(st.integers(1, max_spread(period_min)), label="spread")
    degraded = data.draw(st.integers(1, period_min - 2 - transition - degraded_jitter))
    g = jittered(
        random.Random(seed),
        period_min=period_min,
        spread=spread,
        cycles=cycles,
        degraded=degraded,
        transition=transition,
        high=high,
        drop=drop,
        fast_noise=data.draw(st.floats(0, min(0.15, 0.18 * drop)), label="fast_noise"),
        degraded_noise=data.draw(st.floats(0, 0.08), label="degraded_noise"),
        phase=data.draw(st.integers(0, period_min - 1), label="phase"),
        degraded_jitter=degraded_jitter,
    )
    seen = [s for s in g.starts if s > 0]
    spacings = [b - a for a, b in itertools.pairwise(seen)]
    r = detect_cycle(g.speeds)
    assert r is not None
    assert r.episodes == len(g.starts)
    assert (r.period_min, r.period_max) == (min(spacings), max(spacings))
    assert r.period_mean == pytest.approx(sum(spacings) / len(spacings))
    assert r.period_min <= r.period <= r.period_max
    assert r.share_degraded == pytest.approx(g.degraded / len(g.speeds))
    assert r.long_run_mean == pytest.approx(sum(g.speeds) / len(g.speeds))


@given(
    n=st.integers(20, 200),
    high=st.floats(80, 400),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_property_at_most_two_episodes_are_never_a_cycle(n, high, data, seed):
    """Steady speeds (±5%) with one or two slow stretches of 1-4 requests anywhere: one spacing
    at most, which says nothing about recurrence."""
    rng = random.Random(seed)
    speeds = [high * rng.uniform(0.95, 1.05) for _ in range(n)]
    for _ in range(data.draw(st.integers(1, 2), label="episodes")):
        at = data.draw(st.integers(0, n - 1), label="at")
        for i in range(at, min(n, at + data.draw(st.integers(1, 4), label="length"))):
            speeds[i] = high * rng.uniform(0.2, 0.6)
    assert detect_cycle(speeds) is None


# ------------------------------------------------ the session's window: 200 requests, strays


def test_one_stray_dip_in_a_long_window_is_left_out():
    """Twenty cycles 10-11 requests apart and one one-off slow request in a fast phase: the
    cycle is still found (before, one stray hid it until it left the window), the dip is
    counted apart."""
    seq: list[float] = []
    for i in range(19):
        seq += SEED_CYCLE[:5] + [220.0] * (i % 2) + SEED_CYCLE[5:]
    seq[54] = 60.0  # in the sixth cycle's fast phase
    r = detect_cycle(seq[:200])
    assert r is not None
    assert r.period_text == "every 10-11 requests"
    assert (r.episodes, r.stray_episodes) == (19, 1)


def test_strays_are_allowed_only_one_in_ten():
    assert STRAY_EPISODES_PER == 10
    # Eight cycles and a stray: nine episodes, too few to leave one out.
    seq: list[float] = []
    for i in range(8):
        seq += SEED_CYCLE[:5] + [220.0] * (i % 2) + SEED_CYCLE[5:]
    seq[12] = 60.0
    r = detect_cycle(seq)
    assert r is None or r.stray_episodes == 0  # (the exact method sees a period of 21)


def test_long_slow_stretches_are_not_a_period_2_cycle():
    """Three long slow stretches agree with themselves shifted by 2 requests (0.94), and the
    exact-period method used to report "period 2, 100 cycles"; a period needs about one
    non-fast run per period."""
    seq = [60.0] * 40 + [140.0] * 20 + [60.0] * 30 + [220.0] * 50 + [60.0] * 25 + [220.0] * 20
    seq += [60.0] * 15
    assert detect_cycle(seq) is None


def test_false_positive_rate_on_windows_of_200_is_within_the_bound():
    # Random walks of 100-200 speeds reported a cycle 20% of the time before the run check.
    rng = random.Random(20261123)
    trials = 2_000
    hits = sum(
        detect_cycle(aperiodic_of_kind(rng, lengths=(100, 200))[1]) is not None
        for _ in range(trials)
    )
    assert hits / trials <= FALSE_POSITIVE_BOUND


@given(
    period_min=st.integers(7, 12),
    data=st.data(),
    transition=st.booleans(),
    high=st.floats(80, 400),
    drop=st.floats(0.35, 0.85),
    seed=st.integers(0, 2**32),
)
def test_property_a_stray_dip_in_a_window_of_200(period_min, data, transition, high, drop, seed):
    """A window of 200 requests (11 or more episodes) of a cycle whose spacing varies, with one
    one-off slow request in a fast phase: found with the generated period range, the stray left
    out."""
    rng = random.Random(seed)
    spread = data.draw(st.integers(1, max_spread(period_min)), label="spread")
    fast_noise = data.draw(st.floats(0, min(0.15, 0.18 * drop)), label="fast_noise")
    g = jittered(
        rng,
        period_min=period_min,
        spread=spread,
        cycles=200 // period_min + 1,
        degraded=data.draw(st.integers(1, period_min - 5 - transition), label="degraded"),
        transition=transition,
        high=high,
        drop=drop,
        fast_noise=fast_noise,
        degraded_noise=data.draw(st.floats(0, 0.08), label="degraded_noise"),
        phase=data.draw(st.integers(0, period_min - 1), label="phase"),
    )
    speeds = g.speeds[:200]
    starts = [s for s in g.starts if s < 200]
    degraded_at = [i for i, x in enumerate(speeds) if x <= high * (1 - drop) + high * drop / 4]
    if degraded_at and degraded_at[-1] < starts[-1]:  # the last start is only its transition
        starts.pop()
    speeds, _ = with_stray_dip(rng, speeds, high * (1 - drop), high * (1 - fast_noise))
    seen = [s for s in starts if s > 0]
    spacings = [b - a for a, b in itertools.pairwise(seen)]
    r = detect_cycle(speeds)
    assert r is not None
    assert (r.period_min, r.period_max) == (min(spacings), max(spacings))
    assert (r.episodes, r.stray_episodes) == (len(starts), 1)


def test_three_episodes_seen_in_fewer_than_three_periods_are_a_cycle():
    # 27 answers of the seeds' cycle whose first episode starts at answer 2 (a recording begun
    # mid-cycle): starts at 2, 12 and 22, three episodes seen, period 10 (> 27 // 3).
    seq = (SEED_CYCLE * 3)[3:30]
    r = detect_cycle(seq)
    assert r is not None and r.period == 10
    assert detect_cycle(seq[:21]) is None  # two episodes only


def test_a_lone_slow_answer_in_a_fast_phase_does_not_hide_the_period():
    # One fast answer of the third cycle came out between the levels (a long context): a run of
    # transitions alone is no episode, so the pattern still repeats every 10.
    seq = SEED_CYCLE * 3
    seq[22] = 150
    r = detect_cycle(seq)
    assert r is not None and r.period == 10


def test_a_loop_in_place_of_a_transition_does_not_hide_the_period():
    # A period-7 cycle (3 fast, 1 transition, 2 degraded, 1 recovery); a loop (None: no speed)
    # took the third cycle's transition, and one of its fast answers came out between the levels.
    # The missing point's class is a guess (fast, between a fast and a degraded neighbour), so
    # its pairs are left out of the agreement: before, the third episode started one request
    # late and the period-7 agreement was 0.83, no cycle.
    seq: list[float | None] = [220.0, 215.0, 225.0, 110.0, 60.0, 61.0, 212.0] * 5
    seq[17] = None
    seq[15] = 150.0
    r = detect_cycle(seq)
    assert r is not None and r.period == 7


def drifting_cycle(n: int = 40, high: float = 1600.0, low: float = 480.0) -> list[float]:
    """The seeds' period-10 cycle (5 fast, 1 transition, 3 degraded, 1 recovery) on a fast level
    that halves linearly over `n` answers (acceptance falling as the context grows), the
    degraded level (vanilla speed) steady."""
    out = []
    for i in range(n):
        fast = high * (1 - 0.5 * i / (n - 1))
        phase = i % 10
        out.append((fast + low) / 2 if phase == 5 else low if phase in (6, 7, 8) else fast)
    return out


def test_a_cycle_on_a_drifting_fast_level_keeps_its_period():
    # Over the whole sequence the late fast answers (about 800) sit between the early fast level
    # (1600) and the degraded one (480): classed against the sequence's two levels they are
    # transitions, the episodes run together and no period was found. Classed among their
    # neighbours (step 6 of the module text), each fast phase is fast again.
    seq = drifting_cycle()
    r = detect_cycle(seq)
    assert r is not None and r.period == 10
    assert r.degraded_per_cycle == 3
