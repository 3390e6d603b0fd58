"""The step model: acceptance maths, step costs, the exact expected steps, and request steps."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.sim import step_model as sm
from specmon.sim.profiles import PROFILES, Profile

rates = st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=0, max_size=16)


@given(rates)
def test_acceptance_length_is_one_plus_sum_of_cumulative_rates(conditional) -> None:
    cumulative = sm.cumulative_acceptance(conditional)
    assert all(a >= b for a, b in itertools.pairwise(cumulative))
    al = sm.expected_acceptance_length(conditional)
    assert al == pytest.approx(1.0 + sum(cumulative))
    # the same number from the distribution of accepted counts
    dist = sm.accepted_distribution(conditional)
    assert sum(dist) == pytest.approx(1.0)
    assert 1.0 + sum(j * p for j, p in enumerate(dist)) == pytest.approx(al)


def test_drawn_acceptance_matches_the_cumulative_rates() -> None:
    conditional = sm.conditional_acceptance(PROFILES["gemma4-26b-rtx5090m"], 8)
    rng = random.Random(1234)
    draws = [sm.draw_accepted(conditional, rng) for _ in range(40_000)]
    cumulative = sm.cumulative_acceptance(conditional)
    for position, expected in enumerate(cumulative):
        # vLLM's per-position counter: drafts whose first position+1 tokens were accepted
        share = sum(1 for a in draws if a > position) / len(draws)
        assert share == pytest.approx(expected, abs=0.01)
    mean_al = 1 + sum(draws) / len(draws)
    assert mean_al == pytest.approx(sm.expected_acceptance_length(conditional), rel=0.01)


def test_step_cost_grows_with_n_spec_and_batch() -> None:
    for profile in PROFILES.values():
        costs = [sm.step_time(profile, k) for k in range(0, 21)]
        assert all(a < b for a, b in itertools.pairwise(costs))
        assert costs[0] == pytest.approx(profile.target_step_s)
        assert sm.step_time(profile, 8, batch=3) > sm.step_time(profile, 8)


def test_scale_zero_means_no_acceptance_and_vanilla_yield() -> None:
    profile = PROFILES["gemma4-26b-rtx5090m"]
    conditional = sm.conditional_acceptance(profile, 8, scale=0.0)
    assert sm.expected_acceptance_length(conditional) == 1.0
    # same step cost as the fast phase but one token per step: slower than plain decode
    assert sm.expected_output_throughput(profile, 8, scale=0.0) < sm.expected_output_throughput(
        profile, 0
    )


def test_expected_steps_dynamic_programme_on_small_cases() -> None:
    # always accept everything with K=2: each step emits 3 tokens, capped at the tokens left
    assert sm.expected_decode_steps((1.0, 1.0), 7) == pytest.approx(3.0)
    # never accept: one token per step
    assert sm.expected_decode_steps((0.0, 0.0), 7) == pytest.approx(7.0)
    # one position accepted half the time, 2 tokens left: 1 step always
    assert sm.expected_decode_steps((0.5,), 2) == pytest.approx(1.5)


def _simulated_request_time(profile: Profile, n_spec: int, rng: random.Random) -> float:
    return sum(s.duration for s in sm.request_steps(profile, n_spec, 256, 1024, rng))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_monte_carlo_request_time_agrees_with_the_analytic_expectation(name) -> None:
    profile = PROFILES[name]
    n_spec = profile.default_n_spec
    rng = random.Random(7)
    runs = [_simulated_request_time(profile, n_spec, rng) for _ in range(60)]
    mean = sum(runs) / len(runs)
    assert mean == pytest.approx(sm.expected_request_time(profile, n_spec, 256, 1024), rel=0.02)


def test_request_steps_account_like_vllm_counters() -> None:
    profile = PROFILES["gemma4-26b-h100"]
    steps = list(sm.request_steps(profile, 15, 100, 333, random.Random(3)))
    assert steps[0].prefill and steps[0].tokens == 1 and steps[0].drafts == 0
    decode = steps[1:]
    assert sum(s.tokens for s in steps) == 333
    assert all(s.drafts == 1 and s.draft_tokens == 15 for s in decode)
    assert all(1 <= s.tokens <= 16 and s.accepted == s.tokens - 1 for s in decode)
    # generation tokens = first token + drafts + accepted
    assert sum(s.tokens for s in steps) == 1 + sum(s.drafts + s.accepted for s in decode)


def test_request_steps_without_speculation_have_no_drafts() -> None:
    steps = list(sm.request_steps(PROFILES["gemma4-31b-spark"], 0, 10, 20, random.Random(0)))
    assert len(steps) == 20
    assert all(s.tokens == 1 and s.drafts == 0 and s.draft_tokens == 0 for s in steps)


def test_same_seed_same_steps() -> None:
    profile = PROFILES["gemma4-26b-rtx5090"]
    a = list(sm.request_steps(profile, 13, 256, 500, random.Random("x")))
    b = list(sm.request_steps(profile, 13, 256, 500, random.Random("x")))
    assert a == b


@pytest.mark.parametrize("phase", ["t", "r"])
def test_transition_and_recovery_scales_hit_their_speed_fraction(phase) -> None:
    profile = PROFILES["gemma4-26b-rtx5090m"]
    scale = sm.phase_acceptance_scale(profile, 8, phase)
    assert 0.0 < scale < 1.0
    fast = sm.expected_acceptance_length(sm.conditional_acceptance(profile, 8))
    got = sm.expected_acceptance_length(sm.conditional_acceptance(profile, 8, scale))
    target = sm.TRANSITION_SPEED if phase == "t" else sm.RECOVERY_SPEED
    assert got == pytest.approx(fast * target, rel=1e-3)


def test_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown phase"):
        sm.phase_acceptance_scale(PROFILES["gemma4-26b-h100"], 15, "x")
