"""The chat app through the real session port: the simulator, a dead port, a 401 server, a server
that drops the stream, crafted output through the real stream client, and the no-loss check at
a high token rate."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from tests.support.canned_server import CannedServer
from tests.support.ui_fakes import arrived_text, screen_text, sim_port
from tests.support.waiting import wait_for_app
from textual.widgets import Static

from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.live_port import LivePort
from specmon.ui.widgets.turn import AnswerView

SIZE = (160, 40)


def _port_for(url: str, api_key: str | None = None) -> LivePort:
    def make() -> CollectorProcess:
        config = SessionConfig((Target(url),), api_key=api_key)
        return CollectorProcess(config, state_factory(None))

    return LivePort(make)


async def _ask(pilot, prompt: str) -> None:
    await pilot.click("#prompt")
    for key in prompt:
        await pilot.press(key if key != " " else "space")
    await pilot.press("enter")


def _answers(app) -> list[AnswerView]:
    return list(app.screen.query(AnswerView))


@pytest.mark.slow
async def test_a_simulated_answer_streams_with_numbers_and_the_simulated_badge(fast_sim_port):
    port, _url = fast_sim_port
    app = SpecmonApp(port, settings=ChatSettings(max_tokens=120))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: app.screen.connection is not None)
        await pilot.pause()
        assert "SIMULATED" in screen_text(app).splitlines()[0]
        await _ask(pilot, "hello")
        await wait_for_app(pilot, lambda: bool(_answers(app)) and _answers(app)[0].finished)
        await pilot.pause()
        text = screen_text(app)
        answer = _answers(app)[0].text
        assert answer and answer.split()[0] in text
        assert "120 tokens" in text and "tok/s" in text and "(chunks)" in text
        await _ask(pilot, "more")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
        assert app.screen.conversation.turns[1].status == "ok"


async def test_an_unreachable_server_offers_retry_without_a_traceback():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        port = _port_for(dead)
        app = SpecmonApp(port)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_for_app(pilot, lambda: "cannot use" in screen_text(app))
                text = screen_text(app)
                assert dead in text and "Retry" in text and "Traceback" not in text
                await pilot.press("ctrl+r")
                await pilot.pause()
                await wait_for_app(pilot, lambda: "cannot use" in screen_text(app))
                assert not port.connected
        finally:
            port.close()


async def test_a_wrong_api_key_shows_the_401(server_401):
    port = _port_for(server_401.url, api_key="wrong-key")
    app = SpecmonApp(port)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: "401" in screen_text(app))
            text = screen_text(app)
            assert "401 Unauthorized: the server refused the API key" in text
            assert "wrong-key" not in text
    finally:
        port.close()


@pytest.mark.slow
async def test_a_stream_dropped_mid_answer_keeps_the_partial_answer_and_the_app_usable():
    config = SimConfig(speed=50.0, seed=1, schedule="cycle:1f+drop-after=30,9f")
    with sim_port(config) as (port, _url):
        app = SpecmonApp(port, settings=ChatSettings(max_tokens=100))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: port.connected)
            await _ask(pilot, "first")
            await wait_for_app(pilot, lambda: bool(_answers(app)) and _answers(app)[0].finished)
            await pilot.pause()
            turn = app.screen.conversation.turns[0]
            assert turn.status == "failed" and turn.answer
            status = str(_answers(app)[0].query_one(".answer-status", Static).content)
            assert "failed —" in status and "partial answer kept" in status
            assert "failed —" in screen_text(app)  # on screen (the line may wrap)
            await _ask(pilot, "second")
            await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
            assert app.screen.conversation.turns[1].status == "ok"


def _chunk(text: str, tokens: int, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "canned-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
    }


@pytest.mark.slow
async def test_crafted_output_through_the_real_client_is_literal_and_inert():
    server = CannedServer(
        [
            _chunk("x\x1b[2J\x1b]0;title\x07\x1b]52;c;aGk=\x07 ", 1),
            _chunk("[bold red]r[/] [@click=app.quit]q[/]\n\n", 3),
            _chunk("end\r\x1b[1A", 5, "stop"),
        ]
    )
    port = _port_for(server.url)
    app = SpecmonApp(port)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: port.connected)
            await _ask(pilot, "q")
            await wait_for_app(pilot, lambda: bool(_answers(app)) and _answers(app)[0].finished)
            await pilot.pause()
            text = screen_text(app)
            assert "x␛[2J␛]0;title␇␛]52;c;aGk=␇" in text
            assert "[bold red]r[/] [@click=app.quit]q[/]" in text
            assert "end␍␛[1A" in text
            assert app.is_running
    finally:
        port.close()
        server.stop()


@pytest.mark.slow
async def test_no_token_is_lost_or_reordered_on_screen_at_a_high_rate():
    """At about 10,000 tok/s (twice the rate the chat is built for) every frame shows a prefix of
    what arrived, in order, and the end shows exactly all of it, as many tokens as the server
    counted. (Paced, not unpaced: an unpaced simulator can deliver the whole answer between two
    frames, and then there is no frame in the middle to check.)"""
    with sim_port(SimConfig(speed=50.0, seed=3)) as (port, _url):
        checks: list[bool] = []
        feeds = []
        ask = port.ask

        def ask_ignoring_eos(request):
            feed = ask(replace(request, extra_body={"ignore_eos": True}))
            feeds.append(feed)
            return feed

        port.ask = ask_ignoring_eos  # type: ignore[method-assign]

        def on_frame(_arrivals, _ended) -> None:
            views = _answers(app)
            if views and feeds:
                shown = views[-1].shown_text
                arrived = arrived_text(feeds[-1])
                checks.append(arrived.startswith(shown))

        app = SpecmonApp(port, settings=ChatSettings(max_tokens=3000), frame_hook=on_frame)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: port.connected)
            await _ask(pilot, "go")
            await wait_for_app(pilot, lambda: bool(_answers(app)) and _answers(app)[0].finished)
            await pilot.pause(0.2)
            view = _answers(app)[0]
            arrived = arrived_text(feeds[0])
            assert checks and all(checks)
            assert len(checks) >= 2
            assert view.shown_text == arrived == view.text
            assert view.rendering == 0
            assert not view.query_one(".tail").display
            turn = app.screen.conversation.turns[0]
            assert turn.completion_tokens == 3000
            assert "3000 tokens" in screen_text(app)


@pytest.mark.slow
async def test_the_servers_per_request_acceptance_is_shown_with_its_source():
    spec = {
        "mean_acceptance_length": 2.6,
        "draft_acceptance_rate": 0.4,
        "acceptance_histogram": [5, 2, 4, 2, 2],
        "num_spec_steps": 15,
        "num_accepted_draft_tokens": 24,
        "num_draft_tokens": 60,
        "num_spec_tokens": 4,
    }
    final = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "canned-model",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 40, "total_tokens": 45},
        "metrics": {"speculative_decoding": spec},
    }
    server = CannedServer([_chunk("Hello", 1), _chunk(" world.", 40, "stop"), final])
    port = _port_for(server.url)
    app = SpecmonApp(port)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: port.connected)
            await _ask(pilot, "q")
            await wait_for_app(pilot, lambda: "AL 2.60 (server)" in screen_text(app))
            text = screen_text(app)
            assert "40 tokens" in text and "accept 40%" in text
            await wait_for_app(pilot, lambda: "· ok" in screen_text(app))
            await pilot.press("f3")
            await wait_for_app(pilot, lambda: "not flagged" in screen_text(app))
    finally:
        port.close()
        server.stop()


@pytest.mark.slow
async def test_the_stream_client_sends_the_whole_conversation():
    server = CannedServer([_chunk("An answer.", 3, "stop")])
    port = _port_for(server.url)
    app = SpecmonApp(port, settings=ChatSettings(0.5, 0.9, 50), system="be brief")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: port.connected)
            await _ask(pilot, "first")
            await wait_for_app(pilot, lambda: len(server.requests) == 1)
            await wait_for_app(pilot, lambda: _answers(app)[0].finished)
            await _ask(pilot, "second")
            await wait_for_app(pilot, lambda: len(server.requests) == 2)
            body = server.requests[1]
            assert body["messages"] == [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "An answer."},
                {"role": "user", "content": "second"},
            ]
            assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.5, 0.9, 50)
    finally:
        port.close()
        server.stop()
