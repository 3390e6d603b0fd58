"""The command palette's entries (ctrl+p): every action bound to a key on the current screen and
on the app, with its description and keys, and one "theme: NAME" entry per registered theme.

`binding_commands` is a plain function over the screen's and the app's BINDINGS (tested without
opening the palette); `ActionsProvider` hands its result to Textual's palette. An action bound to
several keys (F5 and r) is one entry that names both keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

PALETTE_ACTION = "command_palette"
"""The palette's own action: not an entry of itself."""

KEY_NAMES = {
    "escape": "Esc",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "question_mark": "?",
    "ctrl+end": "ctrl+End",
}


def key_name(key: str) -> str:
    """A key as a person reads it: "f5" → "F5", "question_mark" → "?"."""
    if key in KEY_NAMES:
        return KEY_NAMES[key]
    if len(key) > 1 and key[0] == "f" and key[1:].isdigit():
        return key.upper()
    return key


@dataclass(frozen=True, slots=True)
class ActionCommand:
    """One palette entry for a bound action."""

    title: str
    """The binding's description (the action's name when it has none)."""
    action: str
    """The action string as bound (e.g. "record", "app.quit", "history(-1)")."""
    keys: tuple[str, ...]
    """Every key bound to it, as shown ("F5", "r")."""
    owner: str
    """"screen" or "app": where the action runs."""

    @property
    def help(self) -> str:
        return "key: " + " / ".join(self.keys) if self.keys else ""


def _bindings(bindings: Iterable[BindingType]) -> list[Binding]:
    """One Binding per key (Textual's "ctrl+c,super+c" is two)."""
    return list(Binding.make_bindings(bindings))


def _app_priority_keys(app: App[Any]) -> dict[str, str]:
    """Key → action of the app's priority bindings: such a key never reaches a screen's
    binding of it (the app's ctrl+c quits, so the screen's ctrl+c copy is not a key of copy)."""
    out: dict[str, str] = {}
    for cls in reversed(type(app).__mro__):
        for b in _bindings(cls.__dict__.get("BINDINGS") or ()):
            if b.priority and not b.system:
                out[b.key] = b.action.removeprefix("app.")
    return out


def binding_commands(screen: Screen[Any], app: App[Any]) -> tuple[ActionCommand, ...]:
    """An entry for every action bound on `screen` (its class's BINDINGS, inherited ones
    included) and on `app`, screen first, in binding order. An action bound on the screen as
    "app.X" is the app's action X (one entry with every key of it). Textual's system bindings
    and the palette's own binding are left out."""
    found: dict[tuple[str, str], ActionCommand] = {}
    taken = _app_priority_keys(app)
    for owner, node in (("screen", screen), ("app", app)):
        for cls in type(node).__mro__:
            own = cls.__dict__.get("BINDINGS")
            for b in _bindings(own or ()):
                if b.system or b.action == PALETTE_ACTION:
                    continue
                where, action = owner, b.action
                if action.startswith("app."):
                    where, action = "app", action[len("app.") :]
                elif action.startswith("screen."):
                    where, action = "screen", action[len("screen.") :]
                if taken.get(b.key, action) != action and not (owner == "app" and b.priority):
                    continue  # the app's priority binding of that key runs instead (ctrl+c)
                key = b.key_display or key_name(b.key)
                old = found.get((where, action))
                if old is None:
                    title = b.description or action.replace("_", " ")
                    found[(where, action)] = ActionCommand(title, action, (key,), where)
                elif key not in old.keys:
                    title = old.title
                    if b.description and title == action.replace("_", " "):
                        title = b.description
                    found[(where, action)] = ActionCommand(title, action, (*old.keys, key), where)
    return tuple(found.values())


def theme_titles(app: App[Any]) -> tuple[str, ...]:
    """The registered themes' names, sorted (each gives a "theme: NAME" entry)."""
    return tuple(sorted(app.available_themes))


def palette_entries(
    screen: Screen[Any], app: App[Any]
) -> tuple[tuple[str, str, Callable[[], object]], ...]:
    """(title, help, callback) of every palette entry: the bound actions, then the themes."""
    out: list[tuple[str, str, Callable[[], object]]] = []
    for c in binding_commands(screen, app):
        runner = screen.run_action if c.owner == "screen" else app.run_action
        out.append((c.title, c.help, partial(runner, c.action)))
    current = app.theme
    for name in theme_titles(app):
        help_text = "the theme in use" if name == current else "switch to this colour theme"
        out.append((f"theme: {name}", help_text, partial(_set_theme, app, name)))
    return tuple(out)


def _set_theme(app: App[Any], name: str) -> None:
    app.theme = name


class ActionsProvider(Provider):
    """The palette's source: every bound action of the screen it was opened on and of the app,
    and the themes."""

    def _entries(self) -> tuple[tuple[str, str, Callable[[], object]], ...]:
        return palette_entries(self.screen, self.app)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._entries():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, text=title, help=help_text)
