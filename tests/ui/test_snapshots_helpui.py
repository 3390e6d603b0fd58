"""SVG snapshots of the help screen and of an answer coloured by acceptance heat (fake port, fixed
numbers, the specmon-dark theme). Never updated by CI: `--snapshot-update` is for a person who
has looked at the new picture."""

from __future__ import annotations

from tests.support.ui_fakes import FakePort
from tests.support.waiting import wait_for_app
from textual.widgets import Input

from specmon.core.events import StreamChunk
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.help import HelpScreen
from specmon.ui.widgets.turn import AnswerView

SIZE = (100, 32)

# (text, cumulative tokens) per chunk, n_spec 8: prefill, then steps of 9 (many), 1 (single),
# 3 (some), a merged chunk of 14 tokens (unknown), 6 (many).
HEAT_CHUNKS = (
    ("def merge(a, b):", 1),
    ('\n    """Merge two sorted lists."""\n', 10),
    ("    out", 11),
    (" = []\n", 14),
    ("    i = j = 0\n    while i < len(a) and j < len(b):\n", 28),
    ("        if a[i] <= b[j]:\n", 34),
)


def _still(pilot) -> None:
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False


async def _help(pilot) -> None:
    await wait_for_app(pilot, lambda: pilot.app.screen.connection is not None)
    await pilot.press("f1")
    await wait_for_app(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))
    _still(pilot)
    await pilot.pause(0.2)


def test_help_screen(snap_compare):
    app = SpecmonApp(FakePort(), theme="specmon-dark")
    assert snap_compare(app, terminal_size=SIZE, run_before=_help)


async def _heat(pilot) -> None:
    app = pilot.app
    port = app.port
    await wait_for_app(pilot, lambda: app.screen.connection is not None)
    app.screen.send("merge two sorted lists")
    await wait_for_app(pilot, lambda: len(port.feeds) == 1)
    feed = port.feeds[0]
    for i, (text, cum) in enumerate(HEAT_CHUNKS):
        feed.emit(
            StreamChunk(
                t=0.1 + i * 0.02, request_id=feed.request_id, text=text, completion_tokens=cum
            )
        )
    feed.tokens = HEAT_CHUNKS[-1][1]
    feed.end()
    await wait_for_app(pilot, lambda: any(a.finished for a in app.screen.query(AnswerView)))
    app.screen.query_one("#conversation").focus()
    await pilot.press("h")
    await wait_for_app(pilot, lambda: app.screen.query_one(AnswerView).heat is not None)
    _still(pilot)
    await pilot.pause(0.2)


def test_heat_coloured_answer(snap_compare):
    app = SpecmonApp(FakePort(hold=True), theme="specmon-dark")
    assert snap_compare(app, terminal_size=SIZE, run_before=_heat)
