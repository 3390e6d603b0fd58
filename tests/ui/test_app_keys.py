"""Pilot tests of the phase-2 keys and screens with a fake port and deterministic views: the side
panel, the transition badge and F3, the answers table (F4), recording (F5 / r) and markers
(F6 / m), the demo's prompts, the narrow layout and the watch dashboard."""

from __future__ import annotations

import pytest
from tests.support.fake_views import session_view
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from textual.widgets import DataTable, Input

from specmon.ui.app import SpecmonApp
from specmon.ui.screens import chat
from specmon.ui.screens.dialogs import AnswersScreen, MarkerScreen
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.side_panel import SidePanel
from specmon.ui.widgets.turn import StatusLine

SIZE = (160, 45)


async def _connected(pilot) -> None:
    await wait_for_app(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
    await pilot.pause()


def _answers(app) -> list[AnswerView]:
    return list(app.screen.query(AnswerView))


def _status(app, i: int) -> str:
    return str(_answers(app)[i].query_one(".answer-status").content)


async def test_the_side_panel_shows_the_published_view():
    port = FakePort()
    port.fake_view = session_view()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await wait_for_app(pilot, lambda: "vLLM 0.20.2" in screen_text(app))
        text = screen_text(app)
        assert "● up" in text and "n_spec 8" in text
        assert "AL      2.00" in text  # the window: two degraded answers (AL 1), one fast (4)
        assert "temp  61 °C / slowdown  90 °C" in text
        assert "transition     1" in text
        # wide: the panel is at the right of the conversation
        panel = app.screen.query_one(SidePanel).region
        conversation = app.screen.query_one("#conversation").region
        assert panel.x >= conversation.right and not app.screen.has_class("-narrow")


async def test_a_narrow_terminal_stacks_the_panel_under_the_chat():
    port = FakePort()
    port.fake_view = session_view()
    app = SpecmonApp(port)
    async with app.run_test(size=(100, 40)) as pilot:
        await _connected(pilot)
        assert app.screen.has_class("-narrow")
        panel = app.screen.query_one(SidePanel).region
        conversation = app.screen.query_one("#conversation").region
        assert panel.y >= conversation.bottom and panel.width >= 90
        assert "vLLM 0.20.2" in screen_text(app)


@pytest.mark.slow
async def test_a_transition_answer_has_its_badge_and_f3_says_why():
    port = FakePort(answers=[["a"]] * 10)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        for i in range(6):  # the sixth answer is the seed's 103 tok/s transition
            app.screen.send(f"q{i}")
            await wait_for_app(pilot, lambda n=i: len(_answers(app)) == n + 1)
            await wait_for_app(pilot, lambda n=i: _answers(app)[n].finished)
        port.fake_view = session_view(prefix="r")  # the same ids as the fake port's answers
        await wait_for_app(pilot, lambda: "TRANSITION (F3: why)" in _status(app, 5))
        await wait_for_app(pilot, lambda: app.screen.last_numbers.flag == "transition")
        await pilot.press("f3")
        await pilot.pause()
        assert "why: TRANSITION: between the recent levels: 103 tok/s" in screen_text(app)
        assert "ok" in _status(app, 0)
        # a click on an earlier answer's numbers says why ITS badge says what it says
        notices = len(app.screen.query(".notice"))
        # (its numbers, verdict included, are the published view's: its badge says ok)
        app.screen.post_message(StatusLine.Clicked(_answers(app)[0]))
        await wait_for_app(pilot, lambda: len(app.screen.query(".notice")) == notices + 1)
        assert "why: not flagged" in str(app.screen.query(".notice").last().content)
        await pilot.click(_answers(app)[5].query_one(".answer-status"))
        await wait_for_app(pilot, lambda: len(app.screen.query(".notice")) == notices + 2)
        assert "why: TRANSITION" in str(app.screen.query(".notice").last().content)


@pytest.mark.slow
async def test_an_earlier_answers_badge_is_redrawn_when_its_verdict_changes(monkeypatch):
    """An answer whose verdict came after its numbers were drawn (classed once the speed levels
    appeared) gets its badge when a later answer ends, as the panel's counts do."""
    # Each answer settles (its numbers refreshed once, then the earlier answers rejudged) in
    # one numbers period instead of 3 s: the fake port's numbers are final at once.
    monkeypatch.setattr(chat, "SETTLE_FRAMES", chat.NUMBERS_EVERY)
    port = FakePort(answers=[["a"]] * 10)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        for i in range(7):
            if i == 6:  # the verdicts arrive: r6 is the seed's transition
                port.fake_view = session_view(prefix="r")
            app.screen.send(f"q{i}")
            await wait_for_app(pilot, lambda n=i: len(_answers(app)) == n + 1)
            await wait_for_app(pilot, lambda n=i: _answers(app)[n].finished)
            await wait_for_app(pilot, lambda: app.screen._settling is None)
            if i == 5:
                assert "TRANSITION" not in _status(app, 5)  # drawn before any verdict
        await wait_for_app(pilot, lambda: "TRANSITION (F3: why)" in _status(app, 5))
        assert "ok" in _status(app, 0)


async def test_f4_shows_every_answer_with_its_badge_and_escape_closes_it():
    port = FakePort()
    port.fake_view = session_view()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f4")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AnswersScreen))
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert table.row_count == 10
        text = screen_text(app)
        assert "AL (source)" in text and "badge" in text
        assert "chat6" in text and "transition" in text and "vanilla-speed" in text
        assert "4.00 /metrics" in text or "4.00 chunks" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, AnswersScreen)


async def test_f5_starts_and_stops_recording_with_a_notice_saying_where():
    port = FakePort()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f5")
        await wait_for_app(pilot, lambda: "recording to " in screen_text(app))
        path = port.recordings[0]
        assert path.endswith(".ndjson") and port.recording == path
        await pilot.press("f5")
        await wait_for_app(pilot, lambda: "recording stopped: " in screen_text(app))
        assert port.recording is None


async def test_f6_adds_a_marker_with_its_label_and_escape_adds_none():
    port = FakePort()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f6")
        await wait_for_app(pilot, lambda: isinstance(app.screen, MarkerScreen))
        await pilot.press("escape")
        await pilot.pause()
        assert port.marks == []
        await pilot.press("f6")
        await wait_for_app(pilot, lambda: isinstance(app.screen, MarkerScreen))
        app.screen.query_one(Input).value = "[bold]slow here"
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: port.marks == ["[bold]slow here"])
        assert "marker: [bold]slow here (not recording)" in screen_text(app)


async def test_r_and_m_type_into_the_prompt_rather_than_act():
    port = FakePort()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("r", "m")
        await pilot.pause()
        assert app.screen.query_one("#prompt", Input).value == "rm"
        assert port.recordings == [] and not isinstance(app.screen, MarkerScreen)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.slow
async def test_the_demo_sends_its_prompts_in_turn_and_the_users_go_next():
    port = FakePort(hold=True)
    clock = FakeClock()
    app = SpecmonApp(port, mode="demo", auto_prompts=("first demo", "second demo"), clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert "SIMULATED" in screen_text(app).splitlines()[0]
        await wait_for_app(pilot, lambda: len(port.requests) == 1)  # the first one at once
        assert port.requests[0].prompt == "first demo"
        # the user types while the demo's answer streams: queued, it goes next
        prompt = app.screen.query_one("#prompt", Input)
        prompt.value = "mine"
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: "queued, goes next: mine" in screen_text(app))
        port.feeds[0].play(["done"])
        port.feeds[0].end()
        await wait_for_app(pilot, lambda: len(port.requests) == 2)
        assert port.requests[1].prompt == "mine"
        port.feeds[1].end()
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
        await wait_for_app(pilot, lambda: app.screen._idle_since is not None)
        await pilot.pause(0.3)
        assert len(port.requests) == 2  # the clock has not moved: no prompt yet
        clock.t = 10.0  # idle for the gap: the next demo prompt
        await wait_for_app(pilot, lambda: len(port.requests) == 3)
        assert port.requests[2].prompt == "second demo"


async def test_the_watch_dashboard_shows_the_panel_and_r_m_f4_act():
    port = FakePort()
    port.fake_view = session_view()
    app = SpecmonApp(port, mode="watch")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await wait_for_app(pilot, lambda: "vLLM 0.20.2" in screen_text(app))
        text = screen_text(app)
        assert "#prompt" not in [f"#{w.id}" for w in app.screen.query("*") if w.id]
        assert "per-position acceptance" in text and "cycle:" in text
        await pilot.press("r")
        await wait_for_app(pilot, lambda: "recording to " in screen_text(app))
        await pilot.press("m")
        await wait_for_app(pilot, lambda: isinstance(app.screen, MarkerScreen))
        app.screen.query_one(Input).value = "spike"
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: port.marks == ["spike"])
        await pilot.press("r")
        await wait_for_app(pilot, lambda: "recording stopped: " in screen_text(app))
        await pilot.press("f4")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AnswersScreen))
        await pilot.press("escape")
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code == 0


async def test_ctrl_c_quits_as_interrupted():
    """Ctrl-C is a key in the app: it quits with return code 130, the command's exit status after
    SIGINT (it quit with 0, while --help says 130); ctrl+q quits with 0 (above)."""
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 130


async def test_the_demo_quits_after_requests_answers():
    port = FakePort(answers=[["one"], ["two"], ["three"]])
    app = SpecmonApp(port, mode="demo", auto_prompts=("p",), clock=FakeClock(), max_answers=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: not app.is_running)
    assert len(port.requests) == 1
