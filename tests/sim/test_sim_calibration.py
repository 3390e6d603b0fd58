"""The profiles reproduce the seeds' figures on the step model itself (analytic, no clock):
256 prompt / 1024 output tokens, concurrency 1, output tok/s as `vllm bench serve` reports it.

Every expected number here was measured on real hardware (the seeds, docs/simulator.md), not
chosen with the profile: a change to the step model or a profile that drifts from what was
measured fails here. What bench and sweep do with a profile is tested with profiles the tests
shape themselves (tests/bench/test_bench_sweep.py)."""

from __future__ import annotations

import pytest

from specmon.sim import step_model as sm
from specmon.sim.profiles import DEFAULT_PROFILE, PROFILES, get_profile

TOLERANCE = 0.05


def throughput(name: str, n_spec: int, scale: float = 1.0) -> float:
    return sm.expected_output_throughput(PROFILES[name], n_spec, 256, 1024, scale)


def acceptance_length(name: str, n_spec: int) -> float:
    return sm.expected_acceptance_length(sm.conditional_acceptance(PROFILES[name], n_spec))


# (profile, n_spec, tok/s the seed reported)
SEED_THROUGHPUTS = [
    ("gemma4-26b-rtx5090", 0, 228.0),
    ("gemma4-26b-rtx5090", 13, 578.0),
    ("gemma4-26b-rtx5090m", 6, 221.0),
    ("gemma4-26b-rtx5090m", 8, 224.0),
    ("gemma4-26b-rtx5090m", 12, 202.0),
    ("gemma4-26b-rtx5090m", 15, 201.0),
    ("gemma4-26b-rtx5090m", 20, 187.0),
    ("gemma4-26b-h100", 15, 222.0),
    ("gemma4-31b-spark", 0, 5.5),
    ("gemma4-31b-spark", 8, 15.4),
]


@pytest.mark.parametrize(("name", "n_spec", "seed_figure"), SEED_THROUGHPUTS)
def test_seed_throughput(name, n_spec, seed_figure) -> None:
    assert throughput(name, n_spec) == pytest.approx(seed_figure, rel=TOLERANCE)


def test_rtx5090m_peaks_at_n8_among_the_sweep_points_and_beyond() -> None:
    swept = [6, 8, 10, 11, 12, 13, 15, 17, 20]
    best = max(range(1, 21), key=lambda k: throughput("gemma4-26b-rtx5090m", k))
    assert best == 8
    assert max(swept, key=lambda k: throughput("gemma4-26b-rtx5090m", k)) == 8


def test_h100_acceptance_length_and_speedup() -> None:
    assert acceptance_length("gemma4-26b-h100", 15) == pytest.approx(7.8, rel=TOLERANCE)
    ratio = throughput("gemma4-26b-h100", 15) / throughput("gemma4-26b-h100", 0)
    assert ratio == pytest.approx(3.4, rel=TOLERANCE)


def test_spark_draft_acceptance_rate() -> None:
    # draft acceptance rate = accepted / drafted = (AL - 1) / K
    rate = (acceptance_length("gemma4-31b-spark", 8) - 1) / 8
    assert rate == pytest.approx(0.2882, rel=TOLERANCE)


@pytest.mark.parametrize(("phase", "seed_figure"), [("d", 60.0), ("r", 212.0)])
def test_cycle_phases_on_the_default_profile(phase, seed_figure) -> None:
    """The seed's cycle at n=8 (fast ~221 is in SEED_THROUGHPUTS): degraded ~60 (drafts verified,
    none accepted), recovery ~212. The transition runs at half the fast AL by design
    (step_model.TRANSITION_SPEED, checked in test_sim_step_model.py), not fitted to the seed."""
    profile = PROFILES[DEFAULT_PROFILE]
    k = profile.default_n_spec
    scale = sm.phase_acceptance_scale(profile, k, phase)
    assert throughput(DEFAULT_PROFILE, k, scale) == pytest.approx(seed_figure, rel=TOLERANCE)


def test_unknown_profile_names_the_choices() -> None:
    with pytest.raises(ValueError) as err:
        get_profile("nope")
    for name in PROFILES:
        assert name in str(err.value)
