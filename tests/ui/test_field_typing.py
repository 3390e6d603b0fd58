"""Keys that arrive together in the chat prompt and the help and conversations searches act in
the order they were typed (as in the dialogs: tests/ui/test_dialog_typing.py).

A burst of keys (fast typing, a paste-like burst, a busy machine, tmux's send-keys) queues up
before the app handles the first. What is typed right after ctrl+u, backspace, ↑ or Enter must
land after that key's effect: the prompt cleared by ctrl+u keeps what was typed next, the prompt
recalled by ↑ gets what was typed after ↑ appended, and what was typed after Enter stays in the
field for the next prompt. `pilot.press` waits for the app after every key and never shows this;
tests.support.keys.keys_at_once posts them all at once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.support.keys import keys_at_once
from tests.support.ui_fakes import FakePort
from tests.support.waiting import wait_for_app
from tests.ui.chat_pilot import SIZE
from tests.ui.chat_pilot import answers as _answers
from tests.ui.chat_pilot import ask as _ask
from tests.ui.chat_pilot import connected as _connected
from textual.app import App
from textual.screen import Screen
from textual.widgets import DataTable, Input

from specmon.core.chat_record import SavedConversation, SavedServer, SavedTurn
from specmon.sources.conversation_store import ConversationStore
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.conversations import ConversationsScreen
from specmon.ui.screens.help import HelpScreen, help_text
from specmon.ui.widgets.turn import PromptInput

# ------------------------------------------------------------------ the chat prompt


def _prompt(app: SpecmonApp) -> PromptInput:
    return app.screen.query_one("#prompt", PromptInput)


async def _chat_ready(pilot: Any) -> None:
    """Connected, with the prompt focused (where the first key of a burst goes)."""
    await _connected(pilot)
    await wait_for_app(pilot, lambda: pilot.app.screen.focused is _prompt(pilot.app))


async def test_a_prompt_typed_right_after_ctrl_u_is_the_one_sent():
    port = FakePort(answers=[["ok"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        keys_at_once(app, *"hello", "ctrl+u", *"world", "enter")
        await wait_for_app(pilot, lambda: port.requests, "the prompt sent")
        assert [r.prompt for r in port.requests] == ["world"]


async def test_backspace_in_a_burst_deletes_the_character_typed_before_it():
    port = FakePort(answers=[["ok"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        keys_at_once(app, *"helxx", "backspace", "backspace", *"lo", "enter")
        await wait_for_app(pilot, lambda: port.requests, "the prompt sent")
        assert [r.prompt for r in port.requests] == ["hello"]


async def test_text_typed_right_after_up_is_added_to_the_recalled_prompt():
    port = FakePort(answers=[["a"], ["b"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        await _ask(pilot, "alpha")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        keys_at_once(app, "up", *" again", "enter")
        await wait_for_app(pilot, lambda: len(port.requests) == 2, "the second prompt sent")
        assert port.requests[1].prompt == "alpha again"


async def test_text_typed_right_after_enter_stays_in_the_field_for_the_next_prompt():
    port = FakePort(answers=[["ok"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        keys_at_once(app, *"first", "enter", *"next")
        await wait_for_app(pilot, lambda: port.requests, "the prompt sent")
        await wait_for_app(pilot, lambda: _prompt(app).value == "next", "the field holds 'next'")
        assert [r.prompt for r in port.requests] == ["first"]
        assert _prompt(app).history == ["first"]


async def test_a_prompt_refused_while_an_answer_streams_stays_with_what_was_typed_after_it():
    """The field empties on Enter; a line the screen does not send comes back, before the keys
    typed after Enter."""
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: port.feeds, "the first answer streaming")
        keys_at_once(app, *"two", "enter", *" more")
        await wait_for_app(pilot, lambda: _prompt(app).value == "two more", "'two more' kept")
        assert [r.prompt for r in port.requests] == ["one"]
        assert _prompt(app).history == ["one"]


async def test_text_typed_right_after_f1_goes_to_the_help_search_not_the_prompt():
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _chat_ready(pilot)
        chat = app.screen
        keys_at_once(app, *"ab", "f1", *"thermal")
        await wait_for_app(pilot, lambda: isinstance(app.screen, HelpScreen), "the help open")
        search = _field(app.screen, "#help-search")
        await wait_for_app(pilot, lambda: search.value == "thermal", "'thermal' in the search")
        assert chat.query_one("#prompt", PromptInput).value == "ab"


# ------------------------------------------------------------------ the searches


class ScreenHost(App[None]):
    """Shows one screen and keeps what it was dismissed with."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.shown = screen
        self.results: list[object] = []

    def on_mount(self) -> None:
        self.push_screen(self.shown, self.results.append)


def _field(screen: Screen[Any], selector: str) -> Input:
    return screen.query_one(selector, Input)


async def test_a_help_search_typed_right_after_ctrl_u_is_the_one_searched():
    screen = HelpScreen()
    app = ScreenHost(screen)
    async with app.run_test(size=SIZE) as pilot:
        field = "#help-search"
        await wait_for_app(pilot, lambda: app.screen is screen and screen.focused is not None)
        keys_at_once(app, *"ttft", "ctrl+u", *"thermal")
        await wait_for_app(pilot, lambda: _field(screen, field).value == "thermal")
        await wait_for_app(pilot, lambda: screen.shown == help_text("thermal")[1])


async def test_backspace_in_a_help_search_burst_deletes_the_character_before_it():
    screen = HelpScreen()
    app = ScreenHost(screen)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: app.screen is screen and screen.focused is not None)
        keys_at_once(app, *"thermxx", "backspace", "backspace", *"al")
        await wait_for_app(pilot, lambda: _field(screen, "#help-search").value == "thermal")


def _store_with(path: Path, *prompts: str) -> None:
    with ConversationStore(path) as store:
        for p in prompts:
            store.save(SavedConversation((SavedTurn(p, "ok"),), SavedServer("http://h:1", "m")))


def _searcher(path: Path) -> Any:
    def search(text: str) -> Any:
        with ConversationStore(path, create=False) as store:
            return store.search(text)

    return search


async def test_a_conversations_search_typed_right_after_ctrl_u_is_the_one_searched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.sqlite"
    _store_with(path, "alpha question", "beta question")
    screen = ConversationsScreen(_searcher(path))
    app = ScreenHost(screen)
    async with app.run_test(size=(120, 30)) as pilot:
        table = screen.query_one("#conversations-table", DataTable)
        await wait_for_app(pilot, lambda: table.row_count == 2, "both conversations listed")
        keys_at_once(app, *"beta", "ctrl+u", *"alpha")
        await wait_for_app(pilot, lambda: _field(screen, "#conversations-search").value == "alpha")
        await wait_for_app(pilot, lambda: [c.title for c in screen.shown] == ["alpha question"])


async def test_enter_typed_right_after_a_search_reopens_what_that_search_finds(
    tmp_path: Path,
) -> None:
    """The search runs in a worker: Enter typed with the search text waits for its result
    instead of reopening the highlighted row of the list shown before (here the search for
    "alpha" is held until the keys are handled)."""
    path = tmp_path / "c.sqlite"
    _store_with(path, "alpha question", "beta question")
    store_search = _searcher(path)
    asked: list[str] = []
    release = threading.Event()

    def held_search(text: str) -> Any:
        asked.append(text)
        if text:
            release.wait(timeout=30)
        return store_search(text)

    screen = ConversationsScreen(held_search)
    app = ScreenHost(screen)
    async with app.run_test(size=(120, 30)) as pilot:
        table = screen.query_one("#conversations-table", DataTable)
        await wait_for_app(pilot, lambda: table.row_count == 2, "both conversations listed")
        alpha = [c.id for c in screen.shown if c.title == "alpha question"]
        keys_at_once(app, *"alpha", "enter")
        await wait_for_app(pilot, lambda: "alpha" in asked, "the search for 'alpha' asked")
        await pilot.pause()  # Enter handled while that search is still running
        release.set()
        await wait_for_app(pilot, lambda: app.results, "the list dismissed")
        assert app.results == alpha
