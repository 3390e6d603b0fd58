"""Injectable clocks. Everything that needs "now" takes a `Clock`, so timing logic is tested
exactly with a `FakeClock`, without sleeping and without timing thresholds."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]
"""A function returning seconds on a monotonic timeline."""


def monotonic_clock() -> float:
    """The default clock: `time.monotonic()`, in seconds."""
    return time.monotonic()


class FakeClock:
    """A clock that only moves when told to. Calling it returns the current time."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by `seconds` (never backwards) and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (asked to advance by {seconds})")
        self._now += seconds
        return self._now

    def set(self, now: float) -> None:
        """Jump to `now`, which must not be earlier than the current time."""
        if now < self._now:
            raise ValueError(f"a clock cannot go backwards ({now} < {self._now})")
        self._now = float(now)
