"""Waiting for a condition in a test: the one poller of the suite.

- `wait_for(condition, what)`: another thread or process makes it true (a server, tmux, a child).
- `wait_for_async(condition, what)`: the same inside a running event loop; `condition` may be a
  coroutine function (a page read over DevTools).
- `wait_for_app(pilot, condition)`: a Textual app under `run_test` makes it true; the app runs
  (`pilot.pause`) between checks, and the bound is in paused frames.

Each returns the condition's first truthy value. On giving up it raises AssertionError naming
`what` and the condition's last value (and `detail()`, e.g. the screen, when given). The time
limits are failure bounds, not speed targets: a test that meets one has hung.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

TIMEOUT_S = 90.0
"""The default failure bound of `wait_for` and `wait_for_async`."""
INTERVAL_S = 0.1
"""The default pause between two checks."""
APP_FRAMES = 400
"""The default bound of `wait_for_app`, in `pilot.pause(APP_FRAME_S)` calls."""
APP_FRAME_S = 0.05


def gave_up(what: str, last: object, bound: str, detail: Callable[[], str] | None = None) -> str:
    """The failure message: what was awaited, for how long, the condition's last value."""
    text = f"gave up waiting for {what} after {bound}; the condition's last value: {last!r}"
    if detail is not None:
        try:
            shown = detail()
        except Exception as exc:  # the detail is for the reader; never hide the failure itself
            shown = f"(could not be read: {type(exc).__name__}: {exc})"
        text += f"\n{shown}"
    return text


def wait_for(
    condition: Callable[[], T],
    what: str,
    *,
    timeout: float = TIMEOUT_S,
    interval: float = INTERVAL_S,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll `condition` every `interval` s until it returns a truthy value, and return that
    value; AssertionError naming `what` and the last value after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(gave_up(what, value, f"{timeout:g} s", detail))
        time.sleep(interval)


async def wait_for_async(
    condition: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout: float = TIMEOUT_S,
    interval: float = INTERVAL_S,
    detail: Callable[[], str] | None = None,
) -> T:
    """`wait_for` inside an event loop: awaits `condition()` when it returns an awaitable, and
    sleeps with `asyncio.sleep` so the loop runs between checks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value: Any = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[no-any-return]
        if loop.time() >= deadline:
            raise AssertionError(gave_up(what, value, f"{timeout:g} s", detail))
        await asyncio.sleep(interval)


async def wait_for_app(
    pilot: Any,
    condition: Callable[[], T],
    what: str | None = None,
    *,
    frames: int = APP_FRAMES,
) -> T:
    """Let the app under `pilot` run (`pilot.pause` between checks) until `condition()` returns
    a truthy value, and return it; AssertionError after `frames` pauses. Without `what` the
    message shows the condition's source line."""
    value = condition()
    for _ in range(frames):
        if value:
            return value
        await pilot.pause(APP_FRAME_S)
        value = condition()
    if value:
        return value
    raise AssertionError(gave_up(what or _source(condition), value, f"{frames} frames"))


def _source(condition: Callable[..., object]) -> str:
    """The condition's source line (a lambda's text), or its name."""
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return getattr(condition, "__qualname__", repr(condition))
