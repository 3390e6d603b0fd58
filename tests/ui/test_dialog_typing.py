"""Keys that arrive together in a dialog act in the order they were typed.

A terminal hands the app a burst of keys when the user types fast, pastes, or the machine is
busy (tmux's send-keys in the terminal tests does the same): the keys queue up before the app
handles the first. Characters typed right after ctrl+u, backspace or Tab must land after that
key's effect, not before it: the field cleared by ctrl+u keeps what was typed next, backspace
deletes the character before it, and what follows Tab goes to the next field (an API key typed
after Tab never shows in the address field). `pilot.press` waits for the app after every key and
never shows this; tests.support.keys.keys_at_once posts them all at once.
"""

from __future__ import annotations

from typing import Any

from tests.support.keys import keys_at_once
from tests.support.waiting import wait_for_app
from textual.app import App
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from specmon.ui.conversation import ChatSettings
from specmon.ui.screens.dialogs import AddServerScreen, MarkerScreen, SettingsScreen

URL = "http://127.0.0.1:8001"


class DialogHost(App[None]):
    """Shows one dialog and keeps what it was dismissed with."""

    def __init__(self, dialog: ModalScreen[Any]) -> None:
        super().__init__()
        self.dialog = dialog
        self.results: list[object] = []

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.results.append)


async def _ready(pilot: Any, dialog: ModalScreen[Any]) -> None:
    """The dialog shown with its first field focused (where the first key goes)."""
    await wait_for_app(
        pilot, lambda: pilot.app.screen is dialog and isinstance(dialog.focused, Input)
    )


async def test_an_address_typed_right_after_ctrl_u_clears_a_refused_one_and_is_added():
    dialog = AddServerScreen()
    app = DialogHost(dialog)
    async with app.run_test() as pilot:
        await _ready(pilot, dialog)
        await pilot.press(*"ftp://nowhere", "enter")
        error = dialog.query_one("#add-error", Static)
        await wait_for_app(pilot, lambda: "must be http or https" in str(error.render()))
        keys_at_once(app, "ctrl+u", *URL, "enter")
        await wait_for_app(pilot, lambda: app.results, "the dialog dismissed")
        assert app.results == [(URL, None)]


async def test_a_key_typed_right_after_tab_goes_to_the_key_field_not_the_address():
    dialog = AddServerScreen()
    app = DialogHost(dialog)
    async with app.run_test() as pilot:
        await _ready(pilot, dialog)
        keys_at_once(app, *URL, "tab", *"secret-key-1", "enter")
        await wait_for_app(pilot, lambda: app.results, "the dialog dismissed")
        assert app.results == [(URL, "secret-key-1")]


async def test_backspace_typed_between_characters_deletes_the_one_before_it():
    dialog = MarkerScreen()
    app = DialogHost(dialog)
    async with app.run_test() as pilot:
        await _ready(pilot, dialog)
        keys_at_once(app, *"slox", "backspace", "backspace", *"ow", "enter")
        await wait_for_app(pilot, lambda: app.results, "the dialog dismissed")
        assert app.results == ["slow"]


async def test_settings_retyped_field_by_field_in_one_burst_are_saved_as_typed():
    dialog = SettingsScreen(ChatSettings(temperature=0.7, top_p=0.5, max_tokens=100))
    app = DialogHost(dialog)
    async with app.run_test() as pilot:
        await _ready(pilot, dialog)
        keys_at_once(app, "end", "ctrl+u", *"0.2", "tab", "end", "ctrl+u", *"0.9", "enter")
        await wait_for_app(pilot, lambda: app.results, "the dialog dismissed")
        assert app.results == [ChatSettings(temperature=0.2, top_p=0.9, max_tokens=100)]


async def test_enter_typed_after_tab_onto_the_save_button_presses_it():
    """The last field's Tab moves to the Save button: the Enter typed after it presses Save."""
    dialog = SettingsScreen(ChatSettings())
    app = DialogHost(dialog)
    async with app.run_test() as pilot:
        await _ready(pilot, dialog)
        keys_at_once(app, *"0.3", "tab", "tab", *"64", "tab", "enter")
        await wait_for_app(pilot, lambda: app.results, "the dialog dismissed")
        assert app.results == [ChatSettings(temperature=0.3, top_p=None, max_tokens=64)]
