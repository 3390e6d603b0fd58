"""Pilot steps the chat screen tests share: wait for the connection, type a prompt, answers."""

from __future__ import annotations

from tests.support.waiting import wait_for_app

from specmon.ui.widgets.answer import AnswerView

SIZE = (160, 40)


async def connected(pilot) -> None:
    """Until the screen has handled the connection (the header shows the server)."""
    await wait_for_app(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
    await pilot.pause()


async def ask(pilot, prompt: str) -> None:
    await pilot.click("#prompt")
    for key in prompt:
        await pilot.press(key if key != " " else "space")
    await pilot.press("enter")


def answers(app) -> list[AnswerView]:
    return list(app.screen.query(AnswerView))
