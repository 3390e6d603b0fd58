"""Pilot tests of the layouts at 80x24, the default terminal size (docs/app.md, "Screen"): the
chat's panel is a summary line that F9 opens whole and the keys scroll; the watch table's rows never
wrap and PgDn scrolls the sections; the replay's answers keep tok/s, AL and the badge."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.fake_views import SEED_SPEEDS, session_view
from tests.support.ui_apps import (
    chat_app_with_view,
    chat_with_graphs,
    recording_port,
    replay_started,
    watch_app,
    watch_settled,
)
from tests.support.ui_fakes import SIM_SERVER, screen_text
from tests.support.watch_views import watch_view
from textual.widgets import DataTable

from specmon.ui.app import SpecmonApp
from specmon.ui.port import Connection
from specmon.ui.widgets.servers_table import layout_for, table_text
from specmon.ui.widgets.side_panel import SidePanel

SMALL = (80, 24)


@pytest.mark.slow
async def test_the_chat_panel_is_a_summary_line_that_f9_opens_and_the_keys_scroll() -> None:
    app = chat_app_with_view(session_view(prefix="r", speeds=SEED_SPEEDS * 4))
    async with app.run_test(size=SMALL) as pilot:
        await chat_with_graphs(pilot)
        screen = app.screen
        summary = screen.query_one("#panel-summary")
        panel = screen.query_one(SidePanel)
        assert summary.display and summary.region.height == 1
        assert "tok/s" in str(summary.render()) and "F9 panel" in str(summary.render())
        await pilot.press("f9")
        await pilot.pause()
        assert panel.has_focus and panel.region.height >= 15  # most of the screen
        await pilot.press("pagedown")
        await pilot.pause()
        assert panel.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        flags = screen.query_one("#panel-flags")
        assert panel.region.contains_region(flags.region)  # the cycle's lines reachable
        await pilot.press("f9")
        await pilot.pause()
        assert screen.query_one("#prompt").has_focus and not panel.display


@pytest.mark.slow
async def test_at_80x24_f9_shows_the_server_url_at_the_top_without_its_credentials() -> None:
    view = session_view(prefix="r")
    secret_url = "http://alice:s3cret-pw@gpu-box.example:8000"
    view = dataclasses.replace(
        view,
        info=dataclasses.replace(view.info, server=secret_url),
        servers=(dataclasses.replace(view.servers[0], source=secret_url),),
    )
    app = chat_app_with_view(view)
    app.port.connection = Connection(dataclasses.replace(SIM_SERVER, url=secret_url))
    async with app.run_test(size=SMALL) as pilot:
        await chat_with_graphs(pilot)
        assert "gpu-box.example" not in screen_text(app)  # the header cut it, the line has none
        await pilot.press("f9")
        await pilot.pause()
        lines = screen_text(app).splitlines()
        top = next(i for i, line in enumerate(lines) if "vLLM 0.20.2" in line)
        assert "url    http://gpu-box.example:8000" in lines[top + 1]
        assert "s3cret" not in screen_text(app) and "alice" not in screen_text(app)


def test_servers_table_rows_never_wrap_and_keep_tok_s_and_al() -> None:
    view = watch_view()
    for width in (76, 60, 44):
        text = table_text(view, 0, width=width).plain
        assert all(len(line) <= width for line in text.splitlines()), width
        header = text.splitlines()[0]
        assert "tok/s" in header and " AL" in header
    assert layout_for(76).kept == layout_for(None).kept  # 80 columns: every column, names cut


async def test_the_watch_dashboard_fits_80_columns_and_pgdn_scrolls_it() -> None:
    view = watch_view(down=False)
    app = watch_app(dataclasses.replace(view, servers=view.servers[:2]))[0]
    async with app.run_test(size=SMALL) as pilot:
        await watch_settled()(pilot)
        table = app.screen.query_one("#servers")
        assert table.region.height == 2 + 1 + 4  # border, header, 2 servers + 2 engine rows
        panel = app.screen.query_one(SidePanel)
        await pilot.press("pagedown")
        await pilot.pause()
        assert panel.scroll_y > 0


async def test_the_replay_answers_keep_tok_s_al_and_badge_at_80_columns() -> None:
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SMALL) as pilot:
        await replay_started(pilot)
        await pilot.press("space", "end")
        await pilot.pause(0.3)
        table = app.screen.query_one("#replay-answers", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert {"tok/s", "AL (source)", "badge"} <= set(labels)
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= table.size.width
