"""The quality sentinel (core/diagnosis/quality.py): hand-computable cases."""

from __future__ import annotations

import pytest

from specmon.core.diagnosis.quality import ALStats, check_answer, repeated_ngram_share

PROSE = " ".join(f"word{i}" for i in range(300))
LOOP = " ".join(["the cat sat on the mat"] * 60)
SOUP = " ".join(["##", "@!", "}{", "ok", "<>", "%%"] * 40)


def _stats(values: list[float]) -> ALStats:
    s = ALStats()
    for v in values:
        s.add(v)
    return s


def test_repeated_share_is_one_minus_distinct_over_total() -> None:
    assert repeated_ngram_share(PROSE) == 0.0
    # 20 words "a b a b ...": 17 4-grams, 2 distinct.
    assert repeated_ngram_share("a b " * 10) == pytest.approx(1 - 2 / 17)
    assert repeated_ngram_share("too short") is None


def test_welford_matches_the_textbook_mean_and_sd() -> None:
    s = _stats([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.mean == pytest.approx(5.0)
    assert s.std() == pytest.approx((32 / 7) ** 0.5)
    assert s.z(5.0 + 2 * (32 / 7) ** 0.5) == pytest.approx(2.0)
    assert _stats([3.0] * 3).z(9.0) is None  # too few answers


def test_a_high_al_answer_that_repeats_is_a_loop() -> None:
    stats = _stats([3.0, 3.2, 2.8, 3.1, 2.9, 3.0, 3.2, 2.8])
    v = check_answer("r", 1.0, LOOP, 400, 8.5, stats, n_spec=8)
    assert v is not None and v.flag == "loop"
    assert v.repeated_ngram_share is not None and v.repeated_ngram_share > 0.9
    assert v.al_z is not None and v.al_z > 3
    assert "repeat" in v.evidence


def test_a_high_al_answer_of_varied_text_is_not_a_loop() -> None:
    stats = _stats([3.0, 3.2, 2.8, 3.1, 2.9, 3.0, 3.2, 2.8])
    v = check_answer("r", 1.0, PROSE, 400, 8.5, stats, n_spec=8)
    assert v is not None and v.flag is None


def test_near_the_ceiling_a_loop_is_flagged_without_history() -> None:
    v = check_answer("r", 1.0, LOOP, 400, 8.5, ALStats(), n_spec=8)
    assert v is not None and v.flag == "loop" and v.al_z is None


def test_a_very_low_al_on_a_good_drafter_with_symbol_soup_is_garbled() -> None:
    stats = _stats([5.0, 5.2, 4.8, 5.1, 4.9, 5.0, 5.2, 4.8])
    v = check_answer("r", 1.0, SOUP, 300, 1.1, stats, n_spec=8)
    assert v is not None and v.flag == "garbled" and "z -" in v.evidence
    assert "83% of its text is not words" in v.evidence  # 5 of every 6 pieces


def test_an_answer_that_fell_to_vanilla_speed_but_reads_normally_is_not_garbled() -> None:
    stats = _stats([5.0, 5.2, 4.8, 5.1, 4.9, 5.0, 5.2, 4.8])
    v = check_answer("r", 1.0, PROSE, 300, 1.1, stats, n_spec=8)
    assert v is not None and v.flag is None and v.al_z is not None and v.al_z <= -3


def test_a_low_al_on_a_weak_drafter_is_not_garbled() -> None:
    stats = _stats([1.5, 1.7, 1.3, 1.6, 1.4, 1.5, 1.7, 1.3])
    v = check_answer("r", 1.0, SOUP, 300, 1.0, stats, n_spec=8)
    assert v is not None and v.flag is None


def test_short_answers_and_answers_without_al_are_not_judged() -> None:
    stats = _stats([3.0] * 10)
    assert check_answer("r", 1.0, LOOP, 50, 8.5, stats, n_spec=8) is None
    assert check_answer("r", 1.0, LOOP, 400, None, stats, n_spec=8) is None
