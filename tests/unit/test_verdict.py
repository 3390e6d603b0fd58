"""An answer's verdict is decided once (core/verdict.py), and the chat's numbers, the answers
table and `watch`'s console all say that one decision."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.support.session_feed import SRC, request_events

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.verdict import request_verdict
from specmon.core.views import GpuView, RequestRow, SpeedClassView, VanillaView
from specmon.ui.answer_numbers import numbers_from_row
from specmon.ui.formatting import DASH, flag_words
from specmon.ui.screens.dialogs import row_cells

TRANSITION = SpeedClassView("transition", (("between_levels", "between the recent levels"),))
SLOW = SpeedClassView("vanilla-speed", (("slow_level", "at the recent slow level"),))
JUDGED_OK = VanillaView(False, True)
UNJUDGED = VanillaView(False, False)


def _row(**changes: Any) -> RequestRow:
    state = SessionState(SessionInfo(server=SRC, n_spec=4))
    for e in request_events("r1", 0.0, tokens_per_step=3, steps=10, step_s=0.01):
        state.apply(e)
    return dataclasses.replace(state.view().rows[-1], **changes)


def _badge(row: RequestRow) -> str:
    return row_cells(row)[-1]


def _chat_flag(row: RequestRow) -> str:
    return numbers_from_row(row, GpuView(None, None, None, (), ())).flag


def test_the_verdict_of_each_kind_of_row() -> None:
    assert request_verdict(_row(outcome="running", vanilla=None, speed_class=None)).kind == (
        "running"
    )
    failed = request_verdict(_row(outcome="failed", error="boom"))
    assert (failed.kind, failed.error) == ("failed", "boom")
    assert request_verdict(_row(outcome="cancelled")).kind == "cancelled"
    between = request_verdict(_row(speed_class=TRANSITION, vanilla=JUDGED_OK))
    assert between.kind == "transition" and between.flagged
    assert between.sentences == ("between the recent levels",)
    assert request_verdict(_row(speed_class=SLOW, vanilla=JUDGED_OK)).kind == "vanilla-speed"
    flagged = VanillaView(True, True, (("net_loss", ""),))
    no_class = request_verdict(_row(speed_class=None, vanilla=flagged))
    assert no_class.kind == "vanilla-speed" and no_class.sentences == ("net_loss",)
    assert request_verdict(_row(speed_class=None, vanilla=JUDGED_OK)).kind == "ok"
    # A fast speed class alone does not judge the request: the vanilla verdict says "ok".
    assert request_verdict(_row(speed_class=SpeedClassView("ok"), vanilla=UNJUDGED)).kind == (
        "unjudged"
    )


def test_the_console_shows_a_transition_like_the_chat() -> None:
    row = _row(speed_class=TRANSITION, vanilla=JUDGED_OK)
    assert _chat_flag(row) == "transition"
    assert _badge(row) == "transition"
    words = flag_words(row)
    assert words.kind == "flagged"
    assert words.text == "TRANSITION: between the recent levels"


def test_a_running_request_is_not_called_failed_by_the_console() -> None:
    row = _row(outcome="running", vanilla=None, speed_class=None)
    assert flag_words(row).text == DASH
    assert flag_words(row).kind == "unknown"
    assert _badge(row) == "running"


def test_every_screen_says_ok_or_not_judged_alike() -> None:
    judged = _row(speed_class=None, vanilla=JUDGED_OK)
    assert (_chat_flag(judged), _badge(judged), flag_words(judged).text) == ("ok", "ok", "ok")
    fast_unjudged = _row(speed_class=SpeedClassView("ok"), vanilla=UNJUDGED)
    assert _chat_flag(fast_unjudged) == "unjudged"
    assert _badge(fast_unjudged) == DASH
    assert flag_words(fast_unjudged).text == DASH


def test_a_slow_answer_with_healthy_acceptance_is_ok_and_says_why() -> None:
    why = ("slow_healthy_acceptance", "slow with healthy acceptance: AL 5.00 against 5.00")
    row = _row(speed_class=SpeedClassView("ok", (why,)), vanilla=JUDGED_OK)
    verdict = request_verdict(row)
    assert verdict.kind == "ok" and not verdict.flagged
    assert verdict.reasons == (why,)
