"""The answers table (F4) in a long session: its once-a-second refresh keeps the cursor and the
scroll position (End, PgDn stay put), a cursor on the last row follows the newest answer, and
f filters the rows (all, flagged, failed; the title says which)."""

from __future__ import annotations

import pytest
from tests.support.fake_views import SEED_SPEEDS, session_view
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from textual.widgets import DataTable

from specmon.core.verdict import request_verdict
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.dialogs import AnswersScreen

SIZE = (120, 40)
LONG = SEED_SPEEDS * 5
"""50 answers: more than the table shows at once."""


async def _open_answers(pilot, app) -> DataTable:
    await wait_for_app(pilot, lambda: getattr(app.screen, "connection", None) is not None)
    await pilot.press("f4")
    await wait_for_app(pilot, lambda: isinstance(app.screen, AnswersScreen))
    table = app.screen.query_one(DataTable)
    await wait_for_app(pilot, lambda: table.row_count == len(LONG))
    return table


async def _refreshes(pilot, app, n: int = 3) -> None:
    """`n` refreshes of the table, as its interval makes them, each with the frames after it."""
    for _ in range(n):
        app.screen.refresh_rows()
        await pilot.pause()


def _cursor_key(table: DataTable) -> str:
    return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)


@pytest.mark.slow
async def test_end_and_page_down_keep_their_place_across_refreshes():
    port = FakePort()
    port.fake_view = session_view(speeds=LONG)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        table = await _open_answers(pilot, app)
        await pilot.press("pagedown")
        await pilot.press("down")
        await pilot.pause()
        row, key, scroll = table.cursor_row, _cursor_key(table), table.scroll_y
        assert row > 10 and scroll > 0
        # the numbers of the answers change (a later publish), then a new answer comes
        port.fake_view = session_view(speeds=(*LONG[:-1], 90.0))
        await _refreshes(pilot, app)
        port.fake_view = session_view(speeds=(*LONG[:-1], 90.0, 215.0))
        await _refreshes(pilot, app)
        assert table.row_count == len(LONG) + 1
        assert (table.cursor_row, _cursor_key(table)) == (row, key)
        assert table.scroll_y == scroll
        await pilot.press("end")
        await pilot.pause()
        last = table.cursor_row
        assert last == table.row_count - 1
        port.fake_view = session_view(speeds=(*LONG[:-1], 91.0, 216.0))
        await _refreshes(pilot, app)
        assert table.cursor_row == last
        assert f"chat{len(LONG) + 1}" in screen_text(app)


async def test_a_cursor_on_the_last_row_follows_the_newest_answer():
    port = FakePort()
    port.fake_view = session_view(speeds=LONG)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        table = await _open_answers(pilot, app)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == len(LONG) - 1
        port.fake_view = session_view(speeds=(*LONG, 215.0, 60.0))
        await _refreshes(pilot, app)
        assert table.row_count == len(LONG) + 2
        assert table.cursor_row == len(LONG) + 1
        assert _cursor_key(table).endswith(f"chat{len(LONG) + 2}")
        await wait_for_app(pilot, lambda: f"chat{len(LONG) + 2}" in screen_text(app))


async def test_f_shows_only_the_flagged_answers_and_the_title_says_so():
    port = FakePort()
    view = port.fake_view = session_view(speeds=LONG)
    flagged = [r.request_id for r in view.rows if request_verdict(r).flagged]
    assert 0 < len(flagged) < len(LONG)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        table = await _open_answers(pilot, app)
        assert "f filter" in screen_text(app)  # the key is in the dialog's footer
        assert f"All answers: {len(LONG)}  (f filters" in screen_text(app)
        await pilot.press("f")
        await wait_for_app(pilot, lambda: table.row_count == len(flagged))
        shown = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert shown == flagged
        assert f"Flagged answers only: {len(flagged)} of {len(LONG)}" in screen_text(app)
        await pilot.press("f")  # failed: none in this session, one row of dashes
        await wait_for_app(pilot, lambda: "Failed answers only: 0 of" in screen_text(app))
        assert table.row_count == 1 and str(table.get_row_at(0)[0]) == "—"
        await pilot.press("f")  # back to all
        await wait_for_app(pilot, lambda: table.row_count == len(LONG))
