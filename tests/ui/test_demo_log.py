"""The demo's simulator log in the app: ctrl+l shows the lines the simulator writes (as a hosted
vLLM's log is shown), where it used to say that specmon did not start the server."""

from __future__ import annotations

import pytest
from tests.support.waiting import wait_for_app
from textual.widgets import Label

from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.log_lines import KeptLog
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.demo_run import DEMO_PROMPTS
from specmon.ui.live_port import LivePort
from specmon.ui.screens.log import LogScreen
from specmon.ui.widgets.log_pane import LogPane


def _pane_text(app) -> str:
    return "\n".join(app.screen.query_one(LogPane).lines)


@pytest.mark.slow
async def test_ctrl_l_in_the_demo_shows_the_simulators_log_lines():
    kept = KeptLog("in memory")
    config = SimConfig(speed=50.0, seed=1, log_interval=0.2)
    with start_in_thread(config, log_sink=kept.push) as sim:

        def make() -> CollectorProcess:
            return CollectorProcess(SessionConfig((Target(sim.url),)), state_factory(None))

        port = LivePort(make)
        try:
            app = SpecmonApp(
                port,
                settings=ChatSettings(max_tokens=64),
                mode="demo",
                auto_prompts=DEMO_PROMPTS,
                server_log=kept,
            )
            async with app.run_test(size=(120, 40)) as pilot:
                # the demo's first answer makes the simulator busy: it logs its interval lines
                await wait_for_app(pilot, lambda: kept.lines_after(0)[0] >= 2, frames=2400)
                await pilot.press("ctrl+l")
                await wait_for_app(pilot, lambda: isinstance(app.screen, LogScreen))
                await wait_for_app(pilot, lambda: "Engine 000: Avg prompt" in _pane_text(app))
                assert "SpecDecoding metrics: Mean acceptance length" in _pane_text(app)
                heading = str(app.screen.query_one("#log-where", Label).content)
                assert heading.startswith("simulator log: in memory")
                await pilot.press("ctrl+l")
                await wait_for_app(pilot, lambda: not isinstance(app.screen, LogScreen))
        finally:
            port.close()
