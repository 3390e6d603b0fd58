"""Connecting, for the chat and the dashboard alike (widgets/connect_box.py): a server that comes
up after the app started is connected to without a key press (automatic retries with backoff,
said on screen), and `--model` is checked against the server's /v1/models at connect, with a
message naming the models it has. Driven with Pilot against the built-in simulator."""

from __future__ import annotations

import socket

import pytest
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app

from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.ui.app import Mode, SpecmonApp
from specmon.ui.live_port import MAX_MODELS_NAMED, LivePort, model_not_served
from specmon.ui.widgets import connect_box
from specmon.ui.widgets.connect_box import ConnectBox

SIZE = (140, 40)
SIM_MODEL = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port(url: str, *, model: str | None = None, require_model: bool = True) -> LivePort:
    def make() -> CollectorProcess:
        return CollectorProcess(SessionConfig((Target(url),)), state_factory(None))

    return LivePort(make, model=model, require_model=require_model)


def _status(app: SpecmonApp) -> str:
    return str(app.screen.query_one("#connect-status").render())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["chat", "watch"])
async def test_a_server_that_comes_up_later_is_connected_to_by_itself(
    monkeypatch: pytest.MonkeyPatch, mode: Mode
) -> None:
    monkeypatch.setattr(connect_box, "RETRY_DELAYS_S", (0.5,))
    number = _free_port()
    url = f"http://127.0.0.1:{number}"
    port = _port(url, require_model=mode == "chat")
    app = SpecmonApp(port, mode=mode)
    try:
        async with app.run_test(size=SIZE) as pilot:
            if mode == "chat":
                await wait_for_app(pilot, lambda: "retrying in 0.5 s" in _status(app), frames=1200)
                assert not port.connected
            with start_in_thread(
                SimConfig(port=number, speed=50.0, seed=1), log_sink=lambda _l: None
            ):
                await wait_for_app(pilot, lambda: port.connected, frames=1200)
                await wait_for_app(pilot, lambda: not app.screen.query_one(ConnectBox).display)
                await wait_for_app(pilot, lambda: SIM_MODEL in screen_text(app), frames=1200)
    finally:
        port.close()


@pytest.mark.slow
async def test_a_model_the_server_does_not_serve_is_named_with_the_ones_it_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connect_box, "RETRY_DELAYS_S", (0.5,))
    with start_in_thread(SimConfig(speed=50.0, seed=1), log_sink=lambda _l: None) as sim:
        port = _port(sim.url, model="no/such-model")
        app = SpecmonApp(port)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_for_app(pilot, lambda: "does not serve" in _status(app), frames=1200)
                status = _status(app)
                assert "'no/such-model'" in status and SIM_MODEL in status
                assert "--model" in status
                assert "retrying" not in status  # only the user can fix it
                box = app.screen.query_one(ConnectBox)
                assert box.retry_in_s is None
                await pilot.pause(1.0)  # no automatic retry came
                assert box.failures == 1 and not port.connected
        finally:
            port.close()


def test_the_models_named_are_bounded() -> None:
    served = tuple(f"m{i}" for i in range(MAX_MODELS_NAMED + 5))
    text = model_not_served("http://h:1", "x", served)
    assert f"m{MAX_MODELS_NAMED - 1}" in text and f"m{MAX_MODELS_NAMED}," not in text
    assert "and 5 more" in text
