"""Exhaustive dispatch on event type: one table per place that handles every kind of event.

The places that dispatch on an event's type (the session fold, the recording encoder and decoder,
the UI's text tail) each build their table with `event_table`, which refuses a table that lacks a
handler for any event type in `core.events.Event`: adding an event type without handling it
everywhere fails at import (and in tests/unit/test_dispatch.py), not silently at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args

from specmon.core.events import Event

H = TypeVar("H", bound=Callable[..., Any])

EVENT_TYPES: tuple[type, ...] = get_args(Event)
"""Every event type, in the order of the `Event` union."""


class MissingHandlerError(TypeError):
    """A dispatch table lacks an event type (or names a type that is not an event)."""


def event_table(handlers: Mapping[type, H], *, name: str) -> dict[type, H]:
    """`handlers` as a dict, checked to cover every event type exactly (`name` is for the error)."""
    missing = [t.__name__ for t in EVENT_TYPES if t not in handlers]
    extra = [t.__name__ for t in handlers if t not in EVENT_TYPES]
    if missing or extra:
        parts = []
        if missing:
            parts.append("no handler for " + ", ".join(missing))
        if extra:
            parts.append("handlers for non-events " + ", ".join(extra))
        raise MissingHandlerError(f"{name}: " + "; ".join(parts))
    return dict(handlers)


def ignore(_event: Any) -> None:
    """The handler of an event type a place deliberately does nothing with."""
    return None
