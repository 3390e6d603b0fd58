"""The diagnosis section through the real app on the simulator: under a thermal drift the demo's
collector reads the simulator's GPU page (labelled simulated), the GPU heats and throttles, and
the panel's diagnosis section attributes the slowdown."""

from __future__ import annotations

import pytest
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from textual.widgets import Static

from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.gpu_page import SIM_GPU_PATH
from specmon.sim.server import SimConfig, start_in_thread
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.demo_run import DEMO_PROMPTS
from specmon.ui.live_port import LivePort
from specmon.ui.widgets.diagnosis_panel import DiagnosisSection


@pytest.mark.slow
async def test_demo_thermal_drift_shows_the_gpu_throttle_and_its_share_of_the_slowdown(
    monkeypatch: pytest.MonkeyPatch,
):
    # The attribution needs 8 answers; the demo's pause between two of them is not under test.
    monkeypatch.setattr("specmon.ui.screens.chat.AUTO_PROMPT_GAP_S", 0.1)
    config = SimConfig(speed=50.0, seed=1, drift="thermal:2")
    with start_in_thread(config, log_sink=lambda _l: None) as sim:

        def make() -> CollectorProcess:
            session = SessionConfig((Target(sim.url),), gpu=f"{sim.url}{SIM_GPU_PATH}")
            return CollectorProcess(session, state_factory(None))

        port = LivePort(make)
        try:
            app = SpecmonApp(
                port,
                settings=ChatSettings(max_tokens=128),
                mode="demo",
                auto_prompts=DEMO_PROMPTS,
            )
            async with app.run_test(size=(160, 45)) as pilot:

                def section_text() -> str:
                    section = app.screen.query_one(DiagnosisSection)
                    return str(section.render()) if section.display else ""

                def thermal_shown() -> bool:
                    # Which share wins (clock, acceptance or other) depends on how busy the
                    # machine is; the section shows the attribution, whichever it is.
                    v = port.view()
                    t = v.diagnosis.thermal if v is not None and v.diagnosis is not None else None
                    return t is not None and t.slow and t.summary[:24] in section_text()

                await wait_for_app(pilot, thermal_shown, frames=4800)
                gpu = str(app.screen.query_one("#panel-gpu", Static).render())
                assert "simulated" in gpu
                view = port.view()
                assert view is not None and view.diagnosis is not None
                thermal = view.diagnosis.thermal
                assert thermal.slow and thermal.now_clock_mhz is not None
                assert thermal.now_clock_mhz < (thermal.ref_clock_mhz or 0)
                assert "SIMULATED" in screen_text(app).splitlines()[0]
        finally:
            port.close()
