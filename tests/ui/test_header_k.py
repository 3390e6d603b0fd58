"""The chat header's K when the server does not announce one: a real vLLM (0.26.0 on an H100,
docs/gpu.md) tells an attached client no K, and the header said "n_spec —" while the side panel
showed the K read from /metrics."""

from __future__ import annotations

from dataclasses import replace

from tests.support.fake_views import session_view
from tests.support.ui_fakes import SIM_SERVER, FakePort
from tests.support.waiting import wait_for_app

from specmon.ui.app import SpecmonApp
from specmon.ui.port import Connection
from specmon.ui.widgets.turn import HeaderBar

SIZE = (160, 45)


def header_text(app) -> str:
    return str(app.screen.query_one(HeaderBar).query_one("#server-line").content)


async def test_the_header_takes_k_from_the_metrics_when_the_server_gave_none():
    port = FakePort(Connection(replace(SIM_SERVER, n_spec=None)))
    port.fake_view = session_view()  # /metrics with 8 positions
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: "n_spec 8" in header_text(app))
        assert "n_spec —" not in header_text(app)


async def test_without_a_scrape_the_header_keeps_the_dash():
    port = FakePort(Connection(replace(SIM_SERVER, n_spec=None)))
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: getattr(app.screen, "connection", None) is not None)
        await pilot.pause(0.3)
        assert "n_spec —" in header_text(app)
