"""The suite's one poller (tests/support/waiting.py): it returns the condition's first truthy
value, and gives up with a message that names what it waited for and the last value seen."""

from __future__ import annotations

import asyncio

import pytest
from tests.support.waiting import wait_for, wait_for_app, wait_for_async


def values(*seen: object):
    it = iter(seen)
    return lambda: next(it)


def test_wait_for_returns_the_first_truthy_value() -> None:
    assert wait_for(values(None, 0, "", 7, 8), "seven", interval=0) == 7


def test_wait_for_gives_up_naming_what_and_the_last_value_and_the_detail() -> None:
    with pytest.raises(AssertionError) as failed:
        wait_for(lambda: [], "the rows", timeout=0, detail=lambda: "the screen:\nempty")
    text = str(failed.value)
    assert "gave up waiting for the rows after 0 s" in text
    assert "last value: []" in text and text.endswith("the screen:\nempty")


def test_a_detail_that_cannot_be_read_does_not_hide_the_failure() -> None:
    with pytest.raises(AssertionError, match=r"(?s)the file .*could not be read: OSError: gone"):

        def broken() -> str:
            raise OSError("gone")

        wait_for(lambda: False, "the file", timeout=0, detail=broken)


def test_wait_for_async_awaits_a_coroutine_condition() -> None:
    seen = iter([None, {"ok": 1}])

    async def read() -> object:
        await asyncio.sleep(0)
        return next(seen)

    assert asyncio.run(wait_for_async(read, "the page", interval=0)) == {"ok": 1}
    with pytest.raises(AssertionError, match="the page after 0 s; the condition's last value: 0"):
        asyncio.run(wait_for_async(lambda: 0, "the page", timeout=0))


class Pilot:
    def __init__(self) -> None:
        self.pauses = 0

    async def pause(self, _delay: float) -> None:
        self.pauses += 1


def test_wait_for_app_lets_the_app_run_between_checks_and_counts_frames() -> None:
    pilot = Pilot()
    assert asyncio.run(wait_for_app(pilot, values(False, False, "drawn"))) == "drawn"
    assert pilot.pauses == 2
    pilot = Pilot()
    with pytest.raises(AssertionError) as failed:
        asyncio.run(wait_for_app(pilot, lambda: pilot.pauses > 99, frames=3))
    assert pilot.pauses == 3
    # Without `what`, the message shows the condition's own source line.
    text = str(failed.value)
    assert "lambda: pilot.pauses > 99" in text and "after 3 frames" in text
