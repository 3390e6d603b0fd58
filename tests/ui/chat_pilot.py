"""Pilot steps the chat screen tests share: wait for the connection, type a prompt, answers."""

from __future__ import annotations

from tests.support.waiting import wait_for_app
from textual import events
from textual.widgets import Input, TextArea

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


async def paste(pilot, text: str) -> None:
    """`text` pasted into the focused field (one Paste event, as a terminal sends a paste), and
    its line there: the pilot types ~15 keys a second, and what these tests check is what
    the line becomes once sent, not the keys."""
    field = pilot.app.focused
    assert isinstance(field, Input | TextArea), field
    pilot.app.post_message(events.Paste(text))
    await wait_for_app(
        pilot, lambda: text in (field.value if isinstance(field, Input) else field.text)
    )


async def ask_pasted(pilot, prompt: str) -> None:
    """`chat_pilot.ask`, with the prompt pasted rather than typed."""
    await pilot.click("#prompt")
    await paste(pilot, prompt)
    await pilot.press("enter")
