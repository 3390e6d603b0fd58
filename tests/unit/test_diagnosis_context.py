"""Acceptance by context length (core/diagnosis/context_cliff.py): hand-computable cases."""

from __future__ import annotations

import pytest

from specmon.core.diagnosis.context_cliff import (
    ContextBins,
    answer_steps,
    bin_index,
    find_cliff,
)


def test_a_context_falls_in_the_bin_of_the_last_edge_at_or_below_it() -> None:
    edges = (0, 100, 200)
    assert [bin_index(c, edges) for c in (-5, 0, 99, 100, 199, 200, 10_000)] == [
        0,
        0,
        0,
        1,
        1,
        2,
        2,
    ]


def test_steps_carry_the_context_before_them_and_leave_out_prefill_cut_and_merged() -> None:
    # prompt 100; chunks: prefill token (1), then 4, 3, 9 (merged at K=4), 2 (cut final).
    steps = answer_steps(100, [1, 5, 8, 17, 19], n_spec=4, final_cut=True)
    assert steps == [(101, 4), (105, 3)]
    # Without K the merged chunk counts; without a cut the final counts.
    assert answer_steps(100, [1, 5, 8, 17, 19], n_spec=None, final_cut=False) == [
        (101, 4),
        (105, 3),
        (108, 9),
        (117, 2),
    ]
    assert answer_steps(None, [1, 5], n_spec=4, final_cut=False) == []


def test_bins_hold_tokens_over_steps() -> None:
    bins = ContextBins((0, 100))
    bins.add_answer([(10, 4), (20, 2), (150, 1), (160, 1)])
    view = bins.view()
    assert [(b.lo_tokens, b.hi_tokens, b.steps, b.acceptance_length) for b in view.bins] == [
        (0, 100, 2, 3.0),
        (100, None, 2, 1.0),
    ]
    assert view.steps == 4
    assert not view.detected  # fewer than 20 steps a side


def test_the_cliff_is_found_and_said_in_k() -> None:
    edges = (0, 4096, 8192, 20480)
    # 40 steps at AL 3.4 below 8k (two bins), 40 steps at 1.6 past 20k, nothing between.
    steps = [20, 20, 0, 40]
    tokens = [68, 68, 0, 64]
    view = find_cliff(edges, steps, tokens)
    assert view.detected
    assert view.al_below == pytest.approx(3.4)
    assert view.al_past == pytest.approx(1.6)
    assert view.drop_frac == pytest.approx(1 - 1.6 / 3.4)
    assert view.summary == "AL 3.4 below 8k, 1.6 past 20k"


def test_a_flat_acceptance_has_no_cliff() -> None:
    view = find_cliff((0, 4096, 8192), [30, 30, 30], [90, 87, 93])
    assert not view.detected and view.summary == ""


def test_bad_edges_are_refused() -> None:
    with pytest.raises(ValueError):
        ContextBins((10, 5))


def test_a_degradation_cycle_in_a_growing_chat_is_not_a_context_cliff() -> None:
    """`specmon demo` (a chat whose context grows through the 5 fast, 1 transition, 3 slow, 1
    recovery cycle) showed "AL 3.5 below 1k, 1.7 past 1k" after 12 answers: its slow answers
    happened to come at longer contexts. A cliff needs a cycle's worth of answers on each side,
    and then both sides hold the same mix."""
    bins = ContextBins()
    al = [4] * 5 + [2] + [1] * 3 + [3]  # tokens a step: one cycle
    for n, a in enumerate(al + al[:2]):  # 12 answers, each 300 tokens of context further on
        bins.add_answer([(300 * n + 10 * i, a) for i in range(25)])
    unguarded = find_cliff(bins.edges, bins.steps, bins.tokens)
    assert unguarded.summary == "AL 4.0 below 1k, 2.6 past 1k"  # what the panel said
    assert not bins.view().detected
    for n in range(40):  # 40 answers: a real cliff past 8k still shows
        context = 9000 if n % 2 else 2000
        bins.add_answer([(context, 4 if context < 8192 else 1)] * 30)
    view = bins.view()
    assert view.detected and view.past_tokens is not None and view.past_tokens >= 8192
