"""SVG snapshots of the chat at a fixed size (pytest-textual-snapshot), with the fake port so every
number is fixed. The snapshots are committed under tests/ui/__snapshots__; CI never updates them
(`--snapshot-update` is for a person who has looked at the new picture)."""

from __future__ import annotations

from tests.ui.conftest import FakePort, wait_for

from specmon.ui.app.app import SpecmonApp
from specmon.ui.app.conversation import ChatSettings
from specmon.ui.app.session_port import Connection
from specmon.ui.app.widgets import AnswerView

SIZE = (100, 32)

ANSWER = [
    "Speculative decoding lets a small **draft** model propose",
    " tokens that the target model verifies in one step.\n\n",
    "- accepted tokens cost one target step\n- rejected ones cost a little extra\n\n",
    "```python\ndef al(accepted, drafts):\n",
    "    return 1 + accepted / drafts\n```\n\nThat is all.",
]


async def _chat(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.port.connected)
    await pilot.click("#prompt")
    for key in "what is it?":
        await pilot.press(key if key != " " else "space")
    await pilot.press("enter")
    await wait_for(pilot, lambda: any(a.finished for a in app.screen.query(AnswerView)))
    app.screen.query_one("#prompt").cursor_blink = False  # a blinking cursor is a coin toss
    await pilot.pause(0.2)


def test_chat_with_one_answer(snap_compare):
    app = SpecmonApp(FakePort(answers=[ANSWER]), settings=ChatSettings(max_tokens=256))
    assert snap_compare(app, terminal_size=SIZE, run_before=_chat)


async def _connected(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.screen.connection is not None)
    await pilot.pause(0.2)


def test_server_unreachable(snap_compare):
    port = FakePort(
        Connection(None, "cannot use http://127.0.0.1:8000: /v1/models: APIConnectionError")
    )
    assert snap_compare(SpecmonApp(port), terminal_size=SIZE, run_before=_connected)


def test_terminal_too_small(snap_compare):
    assert snap_compare(SpecmonApp(FakePort()), terminal_size=(50, 12), run_before=_connected)


async def _settings(pilot) -> None:
    await _connected(pilot)
    await pilot.press("f2")
    await pilot.pause(0.2)


def test_settings_dialog(snap_compare):
    app = SpecmonApp(FakePort(), settings=ChatSettings(0.7, 0.95, 512))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settings)
