"""What each draft position is worth (core/position_worth.py)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from specmon.core.position_worth import (
    HINT_MIN_DRAFTS,
    HINT_MIN_KEPT_SHARE,
    HINT_RATE_THRESHOLD,
    lifetime_worth,
    position_worth,
    window_worth,
)
from specmon.core.views import LifetimeNumbers, WindowNumbers

# 13 positions: a strong head, a tail that rarely accepts (positions 9-13 below 5%).
K13 = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.25, 0.04, 0.03, 0.02, 0.01, 0.005)


def test_expected_tokens_for_every_smaller_n_spec() -> None:
    w = position_worth((0.8, 0.5, 0.2))
    assert w is not None
    assert w.n_spec == 3
    assert w.expected_tokens == pytest.approx((1.0, 1.8, 2.3, 2.5))
    assert w.accepted_per_step == pytest.approx(1.5)


def test_share_of_accepted_tokens_per_position_and_kept_share() -> None:
    w = position_worth((0.8, 0.5, 0.2))
    assert w is not None
    assert w.share_of_accepted == pytest.approx((0.8 / 1.5, 0.5 / 1.5, 0.2 / 1.5))
    assert w.kept_share == pytest.approx((0.0, 0.8 / 1.5, 1.3 / 1.5, 1.0))


def test_hint_names_the_rare_tail_and_the_n_spec_that_keeps_the_rest() -> None:
    w = position_worth(K13)
    assert w is not None and w.hint is not None
    h = w.hint
    assert (h.first_position, h.last_position, h.n_spec) == (9, 13, 8)
    kept = sum(K13[:8]) / sum(K13)
    assert h.kept_share == pytest.approx(kept)
    assert h.expected_tokens == pytest.approx(1 + sum(K13[:8]))
    assert h.text == (
        f"positions 9-13 accept < 5%: n_spec 8 keeps {math.floor(kept * 100)}% "
        "of the accepted tokens at lower verify cost"
    )
    assert "97%" in h.text


def test_single_rare_position_reads_singular() -> None:
    w = position_worth((0.9, 0.7, 0.5, 0.01))
    assert w is not None and w.hint is not None
    assert w.hint.text.startswith("position 4 accepts < 5%: n_spec 3 keeps 99%")


def test_kept_share_is_floored_never_overstated() -> None:
    # 0.004 of 1.804 dropped: 99.78% kept reads 99%, not 100%.
    w = position_worth((1.0, 0.8, 0.004))
    assert w is not None and w.hint is not None
    assert "keeps 99%" in w.hint.text


def test_threshold_is_strict() -> None:
    at = position_worth((0.9, 0.5, HINT_RATE_THRESHOLD))
    below = position_worth((0.9, 0.5, HINT_RATE_THRESHOLD - 0.001))
    assert at is not None and at.hint is None
    assert below is not None and below.hint is not None


@pytest.mark.parametrize(
    "rates",
    [
        (0.9, 0.8, 0.7, 0.6),  # every position pulls its weight
        (0.04, 0.03, 0.02),  # even position 1 rarely accepts: no n_spec >= 1 helps
        (0.0, 0.0, 0.0),  # nothing accepted: the vanilla flag's business
        (0.3, 0.049, 0.049, 0.049, 0.049, 0.049, 0.049, 0.049),  # the rare tail brings a lot
    ],
)
def test_no_hint_when_it_would_not_help(rates: tuple[float, ...]) -> None:
    w = position_worth(rates)
    assert w is not None
    assert w.hint is None


def test_tail_that_brings_more_than_the_bound_gives_no_hint() -> None:
    rates = (0.3, 0.049, 0.049, 0.049, 0.049, 0.049, 0.049, 0.049)
    w = position_worth(rates)
    assert w is not None and w.kept_share is not None
    assert w.kept_share[1] < HINT_MIN_KEPT_SHARE
    # With the bound lowered, the same rates give the hint: the bound is what stopped it.
    hinted = position_worth(rates, min_kept_share=0.4)
    assert hinted is not None and hinted.hint is not None and hinted.hint.n_spec == 1


def test_non_monotone_tail_only_trims_past_the_last_useful_position() -> None:
    # Position 5 accepts 6% (measured noise above position 4's 4%): only 6-7 are trimmed.
    w = position_worth((0.9, 0.6, 0.3, 0.04, 0.06, 0.01, 0.01))
    assert w is not None and w.hint is not None
    assert (w.hint.first_position, w.hint.n_spec) == (6, 5)


def test_few_drafts_give_no_hint() -> None:
    few = position_worth(K13, drafts=HINT_MIN_DRAFTS - 1)
    enough = position_worth(K13, drafts=HINT_MIN_DRAFTS)
    assert few is not None and few.hint is None
    assert enough is not None and enough.hint is not None


@pytest.mark.parametrize(
    "rates",
    [None, (), (0.5, float("nan")), (0.5, float("inf")), (1.2, 0.5), (-0.1,), (True, 0.5)],
)
def test_missing_or_invalid_rates_give_none(rates: object) -> None:
    assert position_worth(rates) is None  # type: ignore[arg-type]


def test_nothing_accepted_has_no_shares() -> None:
    w = position_worth((0.0, 0.0))
    assert w is not None
    assert w.expected_tokens == (1.0, 1.0, 1.0)
    assert w.share_of_accepted is None and w.kept_share is None


def test_window_and_lifetime_inputs() -> None:
    window = WindowNumbers(10.0, 100.0, 2.5, 0.5, K13)
    empty = WindowNumbers(None, None, None, None, None)
    life = LifetimeNumbers(None, 1e4, 50.0, 650.0, 200.0, 5.0, 0.3, K13)
    assert window_worth(empty) is None
    ww = window_worth(window)
    assert ww is not None and ww.hint is not None
    lw = lifetime_worth(life)
    assert lw is not None and lw.hint is None  # 50 drafts since start: too few for a hint
    assert lifetime_worth(None) is None


rates_strategy = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=16).map(
    lambda xs: tuple(sorted(xs, reverse=True))
)


@given(rates_strategy)
@example((3e-10, 2e-10, 1e-10))  # tiny rates: the shares are summed apart from the 1.0
def test_properties(rates: tuple[float, ...]) -> None:
    w = position_worth(rates)
    assert w is not None
    e = w.expected_tokens
    assert len(e) == len(rates) + 1 and e[0] == 1.0
    assert all(b >= a for a, b in itertools.pairwise(e))  # more drafts never fewer tokens
    assert e[-1] <= len(rates) + 1 + 1e-9
    if w.share_of_accepted is not None:
        assert math.isclose(sum(w.share_of_accepted), 1.0, rel_tol=1e-9)
        assert w.kept_share is not None and math.isclose(w.kept_share[-1], 1.0)
    if w.hint is not None:
        assert all(r < HINT_RATE_THRESHOLD for r in rates[w.hint.n_spec :])
        assert w.hint.kept_share >= HINT_MIN_KEPT_SHARE
        assert 1 <= w.hint.n_spec < len(rates)


@pytest.mark.parametrize(
    ("rates", "drafts", "words"),
    [
        ((0.9, 0.8, 0.7, 0.6), None, "every position pulls its weight"),
        ((0.04, 0.03), None, "even position 1 accepts < 5%"),
        ((0.0, 0.0), None, "no draft was accepted"),
        ((0.9, 0.8, 0.01), 20.0, "only 20 speculative steps"),
        ((0.3, 0.2, 0.1, 0.08, 0.06, 0.04, 0.04, 0.04), None, "would keep only 86%"),
    ],
)
def test_no_hint_says_which_gate_stopped_it(
    rates: tuple[float, ...], drafts: float | None, words: str
) -> None:
    worth = position_worth(rates, drafts=drafts)
    assert worth is not None and worth.hint is None
    assert worth.no_hint is not None and words in worth.no_hint
    hinted = position_worth((0.9, 0.8, 0.01))
    assert hinted is not None and hinted.hint is not None and hinted.no_hint is None
