"""Publishing an immutable view without making readers wait: build on one thread, swap one
reference, read from any thread.

The writer (the hub thread, holding the hub's lock while it folds events) calls `mark_dirty()`
after each change and `publish_if_due(now)` at a frame rate; a rebuild happens only when
something changed and at most once per `min_interval_s` of `now`. Readers take `current`, a plain
attribute read: they never hold the lock and never see a half-built view, because a view is a
finished frozen object before its reference is stored (one reference assignment is atomic in
CPython). Pure: no clock of its own, no threads, no locks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

DEFAULT_MIN_INTERVAL_S = 0.05
"""At most 20 rebuilds a second: the UI's fastest frame rate (text ~20 Hz)."""


class ViewPublisher(Generic[V]):
    """Holds the latest published view; rebuilds it when dirty and due."""

    def __init__(
        self, build: Callable[[], V], *, min_interval_s: float = DEFAULT_MIN_INTERVAL_S
    ) -> None:
        self._build = build
        self.min_interval_s = min_interval_s
        self._current: V | None = None
        self._dirty = True
        self._last: float | None = None
        self.builds = 0

    @property
    def current(self) -> V | None:
        """The last published view (None before the first publish). Safe from any thread."""
        return self._current

    @property
    def dirty(self) -> bool:
        """Whether the state changed since the last publish."""
        return self._dirty

    def mark_dirty(self) -> None:
        """The state changed: the next due `publish_if_due` rebuilds."""
        self._dirty = True

    def due(self, now: float) -> bool:
        """Whether `publish_if_due(now)` would rebuild."""
        return self._dirty and (self._last is None or now - self._last >= self.min_interval_s)

    def publish_if_due(self, now: float) -> bool:
        """Rebuild and swap the view when dirty and at least `min_interval_s` after the last
        rebuild; returns whether it did. Call on the writer's thread."""
        if not self.due(now):
            return False
        self._last = now
        self.publish()
        return True

    def publish(self) -> V:
        """Rebuild and swap now (the writer's thread); returns the new view."""
        self._dirty = False
        view = self._build()
        self._current = view
        self.builds += 1
        return view
