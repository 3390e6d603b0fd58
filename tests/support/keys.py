"""Keys as a terminal delivers them when the app is busy: all at once.

`pilot.press` waits for the app to go idle after every key, so it never shows what happens when
keys queue up (a fast typist, a paste-like burst, a loaded machine, tmux's send-keys in the
terminal tests). `keys_at_once` posts the same events the terminal driver would, one after the
other, without waiting in between.
"""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.keys import _character_to_key


def key_event(key: str) -> events.Key:
    """The Key event the driver makes for `key`: a key name ("ctrl+u", "enter") or one
    character ("h", ":", "/")."""
    if len(key) == 1:
        return events.Key(key if key.isalnum() else _character_to_key(key), key)
    return events.Key(key, None)


def keys_at_once(app: App[object], *keys: str) -> None:
    """Post each of `keys` (key names or single characters, e.g. `"ctrl+u", *"http://x",
    "enter"`) to `app`'s queue before it handles any of them, as the driver does with keys that
    arrive together."""
    for key in keys:
        app.post_message(key_event(key))
