"""Percentiles bit-identical to numpy.percentile (linear), as `vllm bench serve` reports them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.core.percentiles import mean, percentile, summary

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@given(st.lists(finite, min_size=1, max_size=200), st.floats(0, 100))
def test_identical_to_numpy_linear(values, p):
    assert percentile(values, p) == float(np.percentile(values, p))


@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=100))
def test_summary_matches_numpy_p50_p95_p99(values):
    s = summary(values)
    assert s == {f"p{p}": float(np.percentile(values, p)) for p in (50, 95, 99)}


def test_empty_is_none_and_non_finite_skipped():
    assert percentile([], 50) is None
    assert summary([]) == {"p50": None, "p95": None, "p99": None}
    assert percentile([1.0, float("nan"), 3.0], 50) == 2.0
    assert mean([]) is None
    assert mean([1.0, 2.0, float("inf")]) == 1.5


def test_out_of_range_percentile_is_an_error():
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)
