"""Counter deltas with reset detection, and windowed deltas/rates from sample timestamps."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from specmon.core import families
from specmon.core.counters import (
    CounterBank,
    counter_increase,
    deltas_between,
    window_between,
)
from specmon.core.events import MetricSample

GEN = families.GENERATION_TOKENS
E0 = (("engine", "0"),)
E1 = (("engine", "1"),)


def scrape(value: float, labels=E0, name=GEN) -> list[MetricSample]:
    return [MetricSample(name, labels, value)]


def test_increase_and_reset():
    assert counter_increase(10, 15) == (5, False)
    assert counter_increase(15, 3) == (3, True)  # restarted from 0: 3 new since
    assert counter_increase(7, 7) == (0, False)


def test_deltas_between_scrapes_per_series_with_reset():
    before = [MetricSample(GEN, E0, 100), MetricSample(GEN, E1, 50)]
    after = [MetricSample(GEN, E0, 130), MetricSample(GEN, E1, 20)]
    deltas, resets = deltas_between(before, after, t=9.0)
    assert deltas == {(GEN, E0): 30, (GEN, E1): 20}
    assert [(r.t, r.labels, r.before, r.after) for r in resets] == [(9.0, E1, 50, 20)]


def test_gauges_are_not_counters():
    before = [MetricSample(families.REQUESTS_RUNNING, E0, 4)]
    after = [MetricSample(families.REQUESTS_RUNNING, E0, 1)]
    assert deltas_between(before, after) == ({}, ())


def test_bank_reports_reset_and_never_goes_negative():
    bank = CounterBank(keep_seconds=100)
    assert bank.observe(0.0, scrape(1000)) == ()
    assert bank.observe(1.0, scrape(1010)) == ()
    resets = bank.observe(2.0, scrape(4))
    assert len(resets) == 1 and resets[0].before == 1010 and resets[0].after == 4
    bank.observe(3.0, scrape(9))
    window = bank.window(10)
    assert window is not None
    assert window.total(GEN) == 10 + 4 + 5
    assert window.rate(GEN) == (10 + 4 + 5) / 3
    assert bank.reset_count == 1


def test_window_uses_sample_timestamps():
    bank = CounterBank(keep_seconds=60)
    for i in range(11):
        bank.observe(float(i), scrape(100.0 * i))
    w = bank.window(5)
    assert (w.t0, w.t1) == (5.0, 10.0)
    assert w.total(GEN) == 500
    assert w.rate(GEN) == 100
    assert bank.window(0) is None  # no earlier point within 0 s


def test_window_needs_two_points():
    bank = CounterBank()
    assert bank.window(10) is None
    bank.observe(0.0, scrape(5))
    assert bank.window(10) is None


def test_a_series_that_appears_later_counts_from_zero():
    bank = CounterBank()
    bank.observe(0.0, scrape(100))
    bank.observe(1.0, scrape(110) + scrape(7, labels=E1))
    w = bank.window(10)
    assert w.deltas == {(GEN, E0): 10, (GEN, E1): 7}
    assert w.total(GEN) == 17


def test_missing_name_gives_none_not_zero():
    bank = CounterBank()
    bank.observe(0.0, scrape(1))
    bank.observe(1.0, scrape(2))
    assert bank.window(5).total(families.SPEC_DRAFTS) is None
    assert bank.window(5).rate(families.SPEC_DRAFTS) is None


def test_out_of_order_scrape_is_ignored():
    bank = CounterBank()
    bank.observe(5.0, scrape(10))
    assert bank.observe(4.0, scrape(1)) == ()
    assert bank.points == 1


def test_ring_is_bounded_by_time_and_count():
    bank = CounterBank(keep_seconds=10, max_points=1000)
    for i in range(500):
        bank.observe(float(i), scrape(float(i)))
    assert bank.points <= 12
    small = CounterBank(keep_seconds=1e9, max_points=5)
    for i in range(50):
        small.observe(float(i), scrape(float(i)))
    assert small.points == 5


# A counter process: increments, with restarts (value back to a small number) at random steps.
steps = st.lists(
    st.tuples(st.integers(0, 1000), st.booleans(), st.integers(0, 50)), min_size=2, max_size=60
)


@given(steps)
def test_property_resets_never_negative_and_sums_add_up(process):
    raw = 0
    true_increase = 0
    values: list[int] = []
    resets_expected = 0
    for inc, restart, after_restart in process:
        if restart and raw > after_restart:
            raw = after_restart  # restarted from 0 and counted after_restart since
            true_increase += after_restart
            resets_expected += 1
        else:
            raw += inc
            true_increase += inc
        values.append(raw)
    true_increase -= values[0]  # the first scrape is the baseline
    bank = CounterBank(keep_seconds=1e9, max_points=10_000)
    pair_sum = 0.0
    resets = 0
    for i, v in enumerate(values):
        resets += len(bank.observe(float(i), scrape(float(v))))
        if i:
            d, _ = deltas_between(scrape(float(values[i - 1])), scrape(float(v)))
            assert d[(GEN, E0)] >= 0
            pair_sum += d[(GEN, E0)]
    assert resets == resets_expected
    w = bank.window(math.inf)
    assert w.total(GEN) >= 0
    assert w.total(GEN) == true_increase == pair_sum
    # Additivity: the window over [a, c] is the window over [a, b] plus [b, c].
    latest = bank.latest()
    assert window_between(latest, latest).total(GEN) == 0
