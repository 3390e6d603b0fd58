"""Pilot tests of the chat screen with a fake session port (no server, deterministic): every key
and action asserts what it visibly does."""

from __future__ import annotations

import pytest
from tests.support.ui_fakes import SIM_SERVER, FakePort, screen_text
from tests.support.waiting import wait_for_app
from tests.ui.chat_pilot import SIZE
from tests.ui.chat_pilot import answers as _answers
from tests.ui.chat_pilot import ask as _ask
from tests.ui.chat_pilot import connected as _connected
from textual.containers import VerticalScroll
from textual.widgets import Button, Input

from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.port import Connection
from specmon.ui.widgets.turn import PromptInput, TurnView


async def test_header_names_the_server_and_shows_simulated():
    app = SpecmonApp(FakePort())
    async with app.run_test(size=(150, 30)) as pilot:
        await _connected(pilot)
        text = screen_text(app)
        first = text.splitlines()[0]
        assert "model cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit" in first
        assert "draft z-lab/gemma-4-26B-A4B-it-DFlash" in first
        assert "n_spec 8" in first and "ctx 8192" in first
        assert "SIMULATED" in first


async def test_a_real_server_has_no_simulated_badge():
    from dataclasses import replace

    port = FakePort(Connection(replace(SIM_SERVER, simulated=False)))
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert "SIMULATED" not in screen_text(app)


async def test_enter_sends_and_the_answer_shows_with_its_numbers():
    port = FakePort(answers=[["Hello", " there", ".\n\nSecond", " paragraph."]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: bool(_answers(app)) and _answers(app)[0].finished)
        await pilot.pause()
        text = screen_text(app)
        assert "hi" in text
        assert "Hello there." in text and "Second paragraph." in text
        # 4 chunks: 1 + 4 + 4 + 4 tokens, 20 ms apart, first at 100 ms.
        assert "13 tokens" in text
        assert "TTFT 100 ms" in text
        assert "200.0 tok/s" in text  # (13 - 1) / 0.06 s
        assert "AL 4.00 (chunks)" in text
        assert app.screen.query_one("#prompt", Input).value == ""


async def test_the_conversation_is_sent_with_each_new_prompt():
    port = FakePort(answers=[["first answer"], ["second answer"]])
    app = SpecmonApp(port, settings=ChatSettings(0.3, 0.8, 64), system="be brief")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        await _ask(pilot, "two")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
        second = port.requests[1]
        assert second.prompt == "two"
        assert second.messages == (("user", "one"), ("assistant", "first answer"))
        assert second.system == "be brief"
        assert (second.temperature, second.top_p, second.max_tokens) == (0.3, 0.8, 64)


@pytest.mark.slow
async def test_up_and_down_walk_the_prompt_history():
    app = SpecmonApp(FakePort(answers=[["a"], ["b"]]))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "alpha")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        await _ask(pilot, "beta")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
        prompt = app.screen.query_one("#prompt", PromptInput)
        await pilot.press("x")
        await pilot.press("up")
        assert prompt.value == "beta"
        await pilot.press("up")
        assert prompt.value == "alpha"
        await pilot.press("up")
        assert prompt.value == "alpha"
        await pilot.press("down")
        assert prompt.value == "beta"
        await pilot.press("down")
        assert prompt.value == "x"  # the line being typed comes back


async def test_escape_cancels_and_keeps_the_partial_answer_marked():
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "long one")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        port.feeds[0].play(["The partial", " answer so far"])
        await wait_for_app(pilot, lambda: "answer so far" in screen_text(app))
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: _answers(app)[0].finished)
        await pilot.pause()
        text = screen_text(app)
        assert port.feeds[0].cancelled
        assert "The partial answer so far" in text
        assert "cancelled — partial answer kept" in text
        turn = app.screen.conversation.turns[0]
        assert turn.status == "cancelled" and turn.answer == "The partial answer so far"


async def test_a_failed_answer_is_kept_marked_and_the_app_stays_usable():
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "q")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        port.feeds[0].play(["Half an"])
        port.feeds[0].end("failed", "connection to http://127.0.0.1:8000 failed: peer closed")
        await wait_for_app(pilot, lambda: _answers(app)[0].finished)
        await pilot.pause()
        text = screen_text(app)
        assert "Half an" in text
        assert "failed — connection to http://127.0.0.1:8000 failed" in text
        assert "partial answer kept" in text
        port.hold = False
        await _ask(pilot, "again")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
        # The failed turn's partial answer is still context (the user saw it).
        assert port.requests[1].messages == (("user", "q"), ("assistant", "Half an"))


@pytest.mark.slow
async def test_f2_changes_sampling_settings_for_the_next_request():
    port = FakePort(answers=[["ok"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f2")
        await pilot.pause()
        assert "temperature" in screen_text(app)
        await pilot.click("#temperature")
        await pilot.press("1", ".", "5")
        await pilot.click("#max-tokens")
        await pilot.press("0")
        await pilot.click("#save")
        await pilot.pause()
        assert "max tokens must be at least 1" in screen_text(app)  # refused, dialog stays
        await pilot.click("#max-tokens")
        await pilot.press("end", "backspace", "3", "2")
        await pilot.click("#save")
        await pilot.pause()
        assert "settings: temperature 1.5, top-p default, max tokens 32" in screen_text(app)
        await _ask(pilot, "go")
        await wait_for_app(pilot, lambda: bool(port.requests))
        assert (port.requests[0].temperature, port.requests[0].max_tokens) == (1.5, 32)


async def test_escape_in_settings_keeps_the_old_values():
    app = SpecmonApp(FakePort(), settings=ChatSettings(0.2, None, None))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f2")
        await pilot.pause()
        await pilot.click("#temperature")
        await pilot.press("9")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.settings == ChatSettings(0.2, None, None)
        assert "temperature" not in screen_text(app).splitlines()[1]


async def test_an_unreachable_server_is_said_and_retry_tries_again():
    port = FakePort(Connection(None, "cannot use http://127.0.0.1:9: connection refused"))
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: "connection refused" in screen_text(app))
        text = screen_text(app)
        assert "Retry" in text and "Traceback" not in text
        assert app.screen.query_one("#retry", Button).display
        await pilot.press("ctrl+r")
        await wait_for_app(pilot, lambda: port.connects == 2)
        port.connection = Connection(SIM_SERVER)
        await pilot.click("#retry")
        await wait_for_app(pilot, lambda: port.connected)
        await pilot.pause()
        assert "connection refused" not in screen_text(app)
        assert "SIMULATED" in screen_text(app)


async def test_a_401_is_shown_as_such():
    port = FakePort(Connection(None, "/v1/models: AuthenticationError: 401", unauthorized=True))
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: "401 Unauthorized" in screen_text(app))
        assert "refused the API key" in screen_text(app)


async def test_a_too_small_terminal_says_how_large_it_must_be():
    app = SpecmonApp(FakePort())
    async with app.run_test(size=(50, 12)) as pilot:
        await _connected(pilot)
        await pilot.pause()
        text = screen_text(app)
        assert "enlarge it to at least 60x15" in text
        assert "SIMULATED" in text
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        text = screen_text(app)
        assert "enlarge" not in text and "SIMULATED" in text.splitlines()[0]


async def test_model_output_with_escapes_and_markup_is_shown_literally():
    crafted = [
        "clear\x1b[2J title\x1b]0;pwned\x07 clip\x1b]52;c;ZXZpbA==\x07 ",
        "[bold red]red[/] [@click=app.quit]quit[/] [link](https://example.invalid)\n\n",
        "tail \x1b[31m[@click=app.quit]x[/]",
    ]
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "q")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        port.feeds[0].play(crafted)
        # While streaming: the settled block and the tail are both literal.
        await wait_for_app(pilot, lambda: "tail" in screen_text(app))
        await wait_for_app(pilot, lambda: _answers(app)[0].segments == 1)
        await pilot.pause()
        streaming = screen_text(app)
        assert "␛[31m[@click=app.quit]x[/]" in streaming
        assert "[bold red]red[/] [@click=app.quit]quit[/]" in streaming
        port.feeds[0].end()
        await wait_for_app(pilot, lambda: _answers(app)[0].finished)
        await pilot.pause()
        text = screen_text(app)
        assert "clear␛[2J title␛]0;pwned␇ clip␛]52;c;ZXZpbA==␇" in text
        assert "[bold red]red[/] [@click=app.quit]quit[/]" in text
        assert "\x1b" not in text
        # Clicking the text that looks like an action does nothing: the app is still running.
        await pilot.click(offset=(20, 3))
        await pilot.pause()
        assert app.is_running


@pytest.mark.slow
async def test_reading_back_is_not_pulled_down_and_ctrl_end_follows_again():
    paragraphs = [f"Paragraph {i} " + "word " * 30 + "\n\n" for i in range(40)]
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "long")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        scroll = app.screen.query_one("#conversation", VerticalScroll)
        port.feeds[0].play(paragraphs[:20])
        await wait_for_app(pilot, lambda: scroll.max_scroll_y > 20 and scroll.scroll_y > 0)
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y  # following the answer
        await pilot.press("pageup")
        await pilot.pause()
        reading = scroll.scroll_y
        assert reading < scroll.max_scroll_y
        port.feeds[0].play(paragraphs[20:])
        await wait_for_app(pilot, lambda: "Paragraph 39" in _answers(app)[0].text)
        await pilot.pause(0.2)
        assert scroll.scroll_y == reading  # not pulled down while reading back
        await pilot.press("ctrl+end")
        await pilot.pause(0.2)
        assert scroll.scroll_y == scroll.max_scroll_y
        port.feeds[0].end()
        await wait_for_app(pilot, lambda: _answers(app)[0].finished)
        await pilot.pause(0.2)
        assert scroll.scroll_y == scroll.max_scroll_y  # follows again


@pytest.mark.slow
async def test_near_max_model_len_the_oldest_turns_are_dropped_with_a_notice():
    from dataclasses import replace

    small = replace(SIM_SERVER, max_model_len=600)
    long_answer = ["word " * 4] * 60  # 237 tokens as the server counts them
    port = FakePort(Connection(small), answers=[long_answer, long_answer, ["z"]])
    app = SpecmonApp(port, settings=ChatSettings(max_tokens=100))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        for i, prompt in enumerate(("one", "two", "three")):
            await _ask(pilot, prompt)
            await wait_for_app(
                pilot, lambda i=i: len(_answers(app)) == i + 1 and _answers(app)[i].finished
            )
        text = screen_text(app)
        assert "dropped the oldest 1 turn" in text and "max_model_len 600" in text
        last = port.requests[-1]
        assert ("user", "one") not in last.messages and ("user", "two") in last.messages
        views = list(app.screen.query(TurnView))
        assert views[0].has_class("-dropped")


@pytest.mark.slow
async def test_a_context_error_from_the_server_resends_with_one_turn_fewer():
    port = FakePort(answers=[["first"], ["second"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        port.hold = True
        await _ask(pilot, "two")
        await wait_for_app(pilot, lambda: len(port.feeds) == 2)
        port.feeds[1].end(
            "failed",
            "HTTP 400: This model's maximum context length is 1024 tokens. However, you "
            "requested 1500 tokens",
        )
        await wait_for_app(pilot, lambda: len(port.feeds) == 3)
        assert port.requests[2].messages == ()
        port.feeds[2].play(["fits now"])
        port.feeds[2].end()
        await wait_for_app(pilot, lambda: _answers(app)[1].finished)
        await pilot.pause()
        text = screen_text(app)
        assert "fits now" in text and "dropped the oldest 1 turn" in text
        assert "failed" not in text


@pytest.mark.slow
async def test_an_answer_the_runtime_resent_without_old_turns_is_one_answer_naming_them():
    """The runtime resent the request without its oldest turn (the server said the context was
    too long): the chat shows one answer, marks the turn dropped and names it in one line."""
    from specmon.core.events import RequestEnded

    port = FakePort(answers=[["first"], ["second"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        port.hold = True
        await _ask(pilot, "two")
        await wait_for_app(pilot, lambda: len(port.feeds) == 2)
        feed = port.feeds[1]
        feed.play(["fits now"])
        feed.emit(RequestEnded(t=1.0, request_id=feed.request_id, dropped_turns=1))
        await wait_for_app(pilot, lambda: _answers(app)[1].finished)
        await pilot.pause()
        text = screen_text(app)
        assert "fits now" in text and "without the oldest 1 turn: turn 1" in text
        assert "“one”" in text
        assert "failed" not in text and len(port.feeds) == 2
        assert next(iter(app.screen.query(TurnView))).has_class("-dropped")


async def test_f3_says_why_the_last_answer_was_flagged():
    from specmon.ui.answer_numbers import AnswerNumbers

    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f3")
        await pilot.pause()
        assert "why: no finished answer yet" in screen_text(app)
        app.screen.last_numbers = AnswerNumbers(
            100,
            60.0,
            0.1,
            1.02,
            0.01,
            "chunks",
            flag="vanilla-speed",
            reasons=("acceptance near 0 (AL 1.02)", "net loss against vanilla 64 tok/s"),
        )
        await pilot.press("f3")
        await pilot.pause()
        assert (
            "why: VANILLA SPEED: acceptance near 0 (AL 1.02); net loss against vanilla 64 tok/s"
            in screen_text(app)
        )
