"""Thermal attribution (core/diagnosis/thermal.py): hand-computable cases."""

from __future__ import annotations

import math

import pytest

from specmon.core.diagnosis.thermal import (
    AnswerPoint,
    StepClockFit,
    attribute,
    gpu_during,
    shares_of,
)


def _point(speed: float, al: float, clock: float | None, temp: float | None = 60.0) -> AnswerPoint:
    return AnswerPoint(
        t=0.0,
        decode_tok_s=speed,
        step_s=al / speed,
        acceptance_length=al,
        sm_clock_mhz=clock,
        temperature_c=temp,
        power_w=300.0,
    )


def test_the_fit_recovers_a_line_in_the_clock_period() -> None:
    fit = StepClockFit()
    for clock in (1000.0, 1250.0, 1500.0, 2000.0, 1725.0):
        fit.add(clock, 0.002 + 0.01 * 1000.0 / clock)
    a, b = fit.coefficients() or (0.0, 0.0)
    assert a == pytest.approx(0.002) and b == pytest.approx(0.01)
    assert fit.usable()
    assert fit.predict(1365.0) == pytest.approx(0.002 + 10.0 / 1365.0)


def test_one_clock_gives_no_fit_and_bad_values_are_ignored() -> None:
    fit = StepClockFit()
    for _ in range(6):
        fit.add(1500.0, 0.01)
    fit.add(0.0, 0.01)
    fit.add(1500.0, float("nan"))
    assert fit.n == 6
    assert fit.coefficients() is None and not fit.usable()


def test_gpu_during_means_clock_maxes_temperature_and_falls_back_on_the_last_sample() -> None:
    samples = [(0.0, 50.0, 100.0, 1800.0), (1.0, 60.0, 200.0, 1600.0), (2.0, 80.0, 300.0, 1400.0)]
    assert gpu_during(samples, 0.5, 2.5) == (1500.0, 80.0, 250.0)
    assert gpu_during(samples, 1.2, 1.8) == (1600.0, 60.0, 200.0)
    assert gpu_during([], 0.0, 1.0) == (None, None, None)


def test_a_clock_drop_at_constant_acceptance_is_all_clock() -> None:
    # Step time proportional to the period: speed ∝ clock. 10 fast answers at 1725 MHz, 5 slow
    # at 1365 MHz, AL 3 throughout.
    fit = StepClockFit()
    points = [_point(1725 / 10, 3.0, 1725.0) for _ in range(10)]
    points += [_point(1365 / 10, 3.0, 1365.0, temp=91.0) for _ in range(5)]
    for p in points:
        assert p.sm_clock_mhz is not None
        fit.add(p.sm_clock_mhz, p.step_s)
    view = attribute(points, fit)
    assert view.slow and view.cause == "clock"
    assert view.clock_share == pytest.approx(1.0)
    assert view.acceptance_share == pytest.approx(0.0)
    assert view.summary.startswith("the GPU clock fell 1725→1365 MHz at 91 °C")


def test_an_acceptance_drop_at_constant_clock_is_all_acceptance() -> None:
    fit = StepClockFit()
    points = [_point(200.0, 4.0, 1700.0) for _ in range(10)]
    points += [_point(100.0, 2.0, 1700.0) for _ in range(5)]
    view = attribute(points, fit)
    assert view.slow and view.cause == "acceptance"
    assert view.acceptance_share == pytest.approx(1.0)
    assert view.clock_share == pytest.approx(0.0)
    assert "acceptance fell 4.00→2.00" in view.summary


def test_a_mixed_slowdown_is_split_in_log_space() -> None:
    # Speed halves: clock ratio explains ln(1.25), AL ratio ln(1.6); ln 1.25 + ln 1.6 = ln 2.
    fit = StepClockFit()
    points = [_point(200.0, 4.0, 2000.0) for _ in range(10)]
    points += [_point(100.0, 2.5, 1600.0) for _ in range(5)]
    view = attribute(points, fit)
    assert view.clock_share == pytest.approx(math.log(1.25) / math.log(2))
    assert view.acceptance_share == pytest.approx(math.log(1.6) / math.log(2))
    assert view.other_share == pytest.approx(0.0, abs=1e-9)


def test_a_share_is_never_above_100_or_below_0_percent() -> None:
    # The clock falls by a quarter (2000 → 1500 MHz) while acceptance rises 10% (3.0 → 3.3): the
    # speed falls less than the clock explains (raw shares 150% and -50%).
    fit = StepClockFit()
    points = [_point(200.0, 3.0, 2000.0) for _ in range(10)]
    points += [_point(200.0 * 0.75 * 1.1, 3.3, 1500.0) for _ in range(5)]
    view = attribute(points, fit)
    assert view.slow and view.cause == "clock"
    shares = (view.clock_share, view.acceptance_share, view.other_share)
    assert shares == pytest.approx((1.0, 0.0, 0.0))
    assert "(100% of the slowdown; acceptance 0%)" in view.summary


def test_shares_of_keeps_each_share_within_0_and_1_summing_to_1() -> None:
    assert shares_of(1.5, -0.5) == (1.0, 0.0, 0.0)
    assert shares_of(0.7, 0.6) == pytest.approx((0.7 / 1.3, 0.6 / 1.3, 0.0))
    assert shares_of(0.25, 0.5) == pytest.approx((0.25, 0.5, 0.25))
    assert shares_of(-0.2, 0.4) == pytest.approx((0.0, 0.4, 0.6))


def test_no_slowdown_is_not_attributed() -> None:
    points = [_point(200.0, 4.0, 1700.0) for _ in range(15)]
    view = attribute(points, StepClockFit())
    assert not view.slow and view.cause is None and view.summary == ""
    assert attribute(points[:4], StepClockFit()).ref_decode_tok_s is None


def test_the_fastest_quarter_of_varied_answers_is_not_a_slowdown() -> None:
    # A healthy server: speeds vary with content (AL with them), nothing slows down. The fastest
    # quarter of the earlier answers (235 tok/s) is 17% above the latest ones by chance alone;
    # they run at the earlier answers' median, so the stretch is not slow.
    fit = StepClockFit()
    earlier = [240.0, 235.0, 230.0, 205.0, 200.0, 200.0, 200.0, 200.0, 195.0, 190.0, 185.0, 180.0]
    points = [_point(s, s / 50, 1725.0) for s in earlier]
    points += [_point(200.0, 4.0, 1725.0) for _ in range(5)]
    view = attribute(points, fit)
    assert view.ref_decode_tok_s is not None and view.ref_decode_tok_s > 1.1 * 200.0
    assert not view.slow and view.cause is None and view.summary == ""


def test_a_gpu_that_throttles_within_its_first_answers_is_still_named() -> None:
    # Only 3 answers ran at the full clock: the median of the earlier ones is throttled, but the
    # clock fell, so the stretch is slow and the clock is its cause.
    fit = StepClockFit()
    points = [_point(1725 / 10, 3.0, 1725.0) for _ in range(3)]
    points += [_point(1365 / 10, 3.0, 1365.0, temp=91.0) for _ in range(12)]
    for p in points:
        assert p.sm_clock_mhz is not None
        fit.add(p.sm_clock_mhz, p.step_s)
    view = attribute(points, fit)
    assert view.slow and view.cause == "clock"
