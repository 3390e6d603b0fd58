"""AL, draft acceptance rate, per-position rates and server tok/s from counter deltas."""

from __future__ import annotations

import pytest
from tests.support.metrics_page_fixtures import vllm_page

from specmon.core import families
from specmon.core.counters import CounterBank, deltas_between
from specmon.core.events import MetricSample
from specmon.core.metrics_page import parse_metrics_page
from specmon.core.specdecode import (
    decode_tokens_per_second,
    gauge_max,
    gauge_sum,
    n_spec_of,
    spec_configured,
    spec_decode_stats,
)


def engine(e: str, drafts, draft_tokens, accepted, per_pos, gen=0.0):
    lab = (("engine", e), ("model_name", "m"))
    out = [
        MetricSample(families.SPEC_DRAFTS, lab, drafts),
        MetricSample(families.SPEC_DRAFT_TOKENS, lab, draft_tokens),
        MetricSample(families.SPEC_ACCEPTED, lab, accepted),
        MetricSample(families.GENERATION_TOKENS, lab, gen),
    ]
    for i, v in enumerate(per_pos):
        out.append(MetricSample(families.SPEC_ACCEPTED_PER_POS, (*lab, ("position", str(i))), v))
    return out


def test_acceptance_numbers_summed_over_engines():
    before = engine("0", 10, 40, 20, [8, 6, 4, 2]) + engine("1", 0, 0, 0, [0, 0, 0, 0])
    after = engine("0", 30, 120, 60, [24, 18, 12, 6]) + engine("1", 20, 80, 20, [10, 6, 3, 1])
    deltas, _ = deltas_between(before, after)
    st = spec_decode_stats(deltas)
    assert st.drafts == 40 and st.draft_tokens == 160 and st.accepted == 60
    assert st.acceptance_length == pytest.approx(1 + 60 / 40)
    assert st.draft_acceptance_rate == pytest.approx(60 / 160)
    assert st.per_position_rates == pytest.approx((26 / 40, 18 / 40, 11 / 40, 5 / 40))


def test_no_drafts_gives_none_never_one_or_zero():
    same = engine("0", 10, 40, 20, [8, 6, 4, 2])
    deltas, _ = deltas_between(same, same)
    st = spec_decode_stats(deltas)
    assert st.drafts == 0
    assert st.acceptance_length is None
    assert st.draft_acceptance_rate is None
    assert st.per_position_rates is None


def test_not_configured_gives_none_everywhere():
    lab = (("engine", "0"),)
    deltas, _ = deltas_between(
        [MetricSample(families.GENERATION_TOKENS, lab, 0)],
        [MetricSample(families.GENERATION_TOKENS, lab, 50)],
    )
    st = spec_decode_stats(deltas)
    assert (st.drafts, st.acceptance_length, st.per_position_rates) == (None, None, None)


def test_greedy_same_weights_draft_gives_al_k_plus_one():
    # K=4, every draft fully accepted: AL = 5.0, rate 1.0, per position all 1.0
    before = engine("0", 0, 0, 0, [0, 0, 0, 0])
    after = engine("0", 50, 200, 200, [50, 50, 50, 50])
    st = spec_decode_stats(deltas_between(before, after)[0])
    assert st.acceptance_length == 5.0
    assert st.draft_acceptance_rate == 1.0
    assert st.per_position_rates == (1.0, 1.0, 1.0, 1.0)


def test_reset_between_scrapes_is_not_negative():
    before = engine("0", 1000, 4000, 2000, [800, 600, 400, 200])
    after = engine("0", 10, 40, 20, [8, 6, 4, 2])
    deltas, resets = deltas_between(before, after)
    assert len(resets) == 7  # every spec counter went down; generation_tokens stayed at 0
    st = spec_decode_stats(deltas)
    assert st.acceptance_length == pytest.approx(3.0)


def test_configured_and_k_from_page():
    page = parse_metrics_page(vllm_page(n_spec=8, engines=("0", "1")))
    assert spec_configured(page) is True
    assert n_spec_of(page) == 8
    plain = parse_metrics_page(vllm_page(n_spec=None))
    assert spec_configured(plain) is False
    assert n_spec_of(plain) is None


def test_server_decode_rate_from_generation_tokens():
    bank = CounterBank()
    lab = (("engine", "0"),)
    for t, v in [(0.0, 0), (1.0, 150), (2.0, 300), (4.0, 600)]:
        bank.observe(t, [MetricSample(families.GENERATION_TOKENS, lab, v)])
    assert decode_tokens_per_second(bank.window(10)) == 150
    assert decode_tokens_per_second(None) is None


def test_gauges():
    s = [
        MetricSample(families.REQUESTS_RUNNING, (("engine", "0"),), 2),
        MetricSample(families.REQUESTS_RUNNING, (("engine", "1"),), 3),
        MetricSample(families.KV_CACHE_USAGE, (("engine", "0"),), 0.25),
        MetricSample(families.KV_CACHE_USAGE, (("engine", "1"),), 0.5),
    ]
    assert gauge_sum(s, families.REQUESTS_RUNNING) == 5
    assert gauge_max(s, families.KV_CACHE_USAGE) == 0.5
    assert gauge_sum(s, families.REQUESTS_WAITING) is None
