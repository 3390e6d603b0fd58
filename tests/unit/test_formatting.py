"""The presentation rules shared by the Rich console and the Textual app (ui/formatting.py)."""

from __future__ import annotations

import dataclasses

from tests.support.session_feed import SRC, request_events

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import Acceptance, RequestRow, VanillaView
from specmon.core.watch_json import cycle_json
from specmon.ui.formatting import (
    DASH,
    cycle_text,
    flag_words,
    fmt,
    fmt_acceptance,
    fmt_frac_pct,
    fmt_rates,
    lifetime_label,
)


def _row() -> RequestRow:
    state = SessionState(SessionInfo(server=SRC, n_spec=4))
    for e in request_events("r1", 0.0, tokens_per_step=3, steps=10, step_s=0.01):
        state.apply(e)
    return state.view().rows[-1]


def test_missing_is_a_dash_and_zero_stays_zero() -> None:
    assert fmt(None) == DASH
    assert fmt(0.0) == "0.0"
    assert fmt(True) == DASH
    assert fmt_frac_pct(None) == DASH
    assert fmt_frac_pct(0.456) == "46%"
    assert fmt_rates(None) == DASH
    assert fmt_rates((0.5, 0.25)) == "0.50 0.25"


def test_acceptance_is_written_with_its_source() -> None:
    assert fmt_acceptance(Acceptance("server", 2.6)) == "2.60 server"
    assert fmt_acceptance(Acceptance("metrics", 3.0)) == "3.00 /metrics"
    assert fmt_acceptance(Acceptance("chunks", None)) == DASH
    assert fmt_acceptance(None) == DASH


def test_since_start_label_says_since_when() -> None:
    assert lifetime_label(None) == "since start"
    assert lifetime_label(120.4) == "since reset at 120 s"


def test_flag_words() -> None:
    row = _row()
    assert flag_words(dataclasses.replace(row, vanilla=VanillaView(False, True))).text == "ok"
    assert flag_words(dataclasses.replace(row, vanilla=VanillaView(False, False))).text == DASH
    flagged = VanillaView(True, True, (("net_loss", "net loss: x\nforged line"),))
    words = flag_words(dataclasses.replace(row, vanilla=flagged))
    assert words.kind == "flagged"
    assert words.text == "VANILLA SPEED: net loss: x forged line"  # one line, whatever the text
    failed = dataclasses.replace(row, outcome="failed", error="\x1b[2Jboom")
    assert flag_words(failed).text == "failed: [2Jboom"
    assert flag_words(failed).kind == "failed"


SEED_CYCLE = (221, 214, 218, 222, 230, 103, 59, 62, 62, 212)


def test_cycle_view_and_its_words_say_the_period_range_and_the_long_run() -> None:
    """The seed's cycle four times with one extra fast request in the second cycle: the view
    carries the varying spacing, and the shared words say "every 10-11 requests"."""
    speeds = list(SEED_CYCLE * 4)
    speeds.insert(12, 220)
    state = SessionState(SessionInfo(server=SRC))
    t = 0.0
    for i, speed in enumerate(speeds):
        for e in request_events(f"r{i}", t, tokens_per_step=1, steps=20, step_s=1 / speed):
            state.apply(e)
        t += 1.0
    cycle = state.view().cycle
    assert cycle is not None and cycle.detected
    assert (cycle.period_min, cycle.period_max) == (10, 11)
    assert cycle.episodes == 4
    assert cycle.degraded_per_cycle == 3
    text = cycle_text(cycle)
    assert text is not None
    assert text.startswith("every 10-11 requests, 3 degraded, long-run ")
    long_run = sum(speeds) / len(speeds)
    assert f"long-run {long_run:.0f} vs " in text
    as_json = cycle_json(cycle)
    assert as_json is not None
    assert (as_json["period_min"], as_json["period_max"], as_json["episodes"]) == (10, 11, 4)
    assert cycle_text(dataclasses.replace(cycle, detected=False)) is None
    assert cycle_text(None) is None


def test_numbers_too_wide_for_their_field_are_written_out_of_range():
    from specmon.ui.formatting import fit, fmt_count, fmt_tok_s

    assert fmt_tok_s(9_999_999.9) == "9999999.9"
    assert fmt_tok_s(1e308) == ">1e7"
    assert fmt_tok_s(-1e308) == "<-1e6"
    assert fmt_frac_pct(1e308) == ">1e5%"  # 1e308 * 100 is inf: never "inf%"
    assert fmt_frac_pct(float("inf")) == ">1e5%"
    assert fmt_count(1e308) == ">1e15"
    assert fmt(1e308, ".0f") == ">1e15"
    assert fit(1e308, ".0f", 4) == ">1e4" and fit(-1e308, ".0f", 4) == "<0"
    assert fit(float("nan"), ".1f", 7) == DASH
    assert fmt_rates((1e308, 0.5)) == ">1e2 0.50"
    for value in (1e308, -1e308, float("inf"), float("-inf")):
        for width in (4, 5, 7, 9):
            assert len(fit(value, ".1f", width)) <= width
