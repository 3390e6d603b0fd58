"""The presentation rules shared by the Rich console and the Textual app (ui/formatting.py)."""

from __future__ import annotations

import dataclasses

from tests.unit.session_feed import SRC, request_events

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import Acceptance, RequestRow, VanillaView
from specmon.ui.formatting import (
    DASH,
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
