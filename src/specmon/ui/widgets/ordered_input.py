"""A text field in which keys that arrive together act in the order they were typed (the
dialogs' fields, the chat prompt, the help and conversations searches)."""

from __future__ import annotations

from textual import events
from textual.dom import NoScreen
from textual.widgets import Input


class OrderedInput(Input):
    """An Input in which keys that arrive together act in the order they were typed.

    Textual's Input inserts a typed character as soon as the key reaches it, but runs a bound key
    (ctrl+u, backspace, the arrows, Enter, the screen's Tab) only after the key has bubbled up to
    the app, and the app sends each key to the field focused when the key arrived. So when keys
    queue up (fast typing, a burst from the terminal, a busy machine), the text typed right after
    ctrl+u went in first and was cleared with the old text, and what was typed after Tab (an API
    key) went into the field before it. Textual's own bug:
    https://github.com/Textualize/textual/issues/6605.

    Here a bound key runs its binding when it reaches the field, as the app would run it: the
    non-priority bindings of the focus chain from the field up, the first whose action does not
    skip (the field's own ↓ scrolls nothing and skips, so the screen's ↓ runs); priority bindings
    were tried before the key was sent here. A key that reaches the field after focus has moved
    on goes to the widget focused now, on the screen shown now: a bound key that opens a screen
    (F1, the help) holds the keys after it until that screen is up, so they reach its field."""

    async def _on_key(self, event: events.Key) -> None:
        try:
            screen = self.screen
            shown = self.app.screen
        except NoScreen:  # being removed: the key goes where an Input's would
            return
        focused = shown.focused
        if focused is not self and (focused is not None or shown is not screen):
            event.stop()
            event.prevent_default()
            # Sent on as the app sends a key, to the widget focused now or else the screen shown
            # now (marked forwarded: if nothing there handles it, it bubbles up to the app's
            # bindings and is not sent to the focused widget again).
            (focused or shown)._forward_event(events.Key(event.key, event.character))
            return
        if event.is_printable:
            return  # Input's own handler, next in the class chain, inserts it
        if await self.app._check_bindings(event.key):
            event.stop()
            opened = self.app.screen
            if opened is not screen:  # the key opened a screen (F1: the help): the keys typed
                await opened._mounted_event.wait()  # after it go to its field, once it is up
        # else no binding took it: it bubbles up to the app as before
