"""`specmon chat` attached to a real `vllm serve` (the noised draft, 4 speculative tokens, vLLM's
`--per-request-spec-decode-metrics detailed`).

In-process (Textual's Pilot, the real session port and stream client): the random model's answer
(arbitrary text) is shown literally, and the AL and acceptance rate under it are the ones vLLM's
own per-request object reports for that very request (`RequestEnded.spec_decoding`, read from the
same stream). In a real terminal (tmux, the installed command): the answer and its server AL are on
the captured screen, the pane title is unchanged, and ctrl+q leaves nothing running.
"""

from __future__ import annotations

import re
import threading

import pytest
from tests.real_vllm.server import VllmServer
from tests.support.ui_fakes import arrived_text, screen_text
from tests.support.waiting import wait_for_app

from specmon.core.events import RequestEnded
from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.formatting import visible
from specmon.ui.live_port import LivePort
from specmon.ui.widgets.answer import AnswerView

SIZE = (200, 40)  # wide enough that the numbers line does not wrap beside the side panel
MAX_TOKENS = 48
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


async def _type(pilot, text: str) -> None:
    await pilot.click("#prompt")
    for key in text:
        await pilot.press(key if key != " " else "space")
    await pilot.press("enter")


async def test_a_real_vllm_answer_is_literal_and_shows_vllms_own_acceptance(
    vllm_draft_noised: VllmServer,
) -> None:
    server = vllm_draft_noised
    ends: list[RequestEnded] = []
    feeds = []
    lock = threading.Lock()

    def make() -> CollectorProcess:
        return CollectorProcess(SessionConfig((Target(server.url),)), state_factory(None))

    port = LivePort(make)
    ask = port.ask

    def ask_and_watch(request):
        feed = ask(request)
        feeds.append(feed)
        on_event = feed.on_event

        def watched(event) -> None:  # the hub thread: the same events the answer is made of
            if isinstance(event, RequestEnded):
                with lock:
                    ends.append(event)
            on_event(event)

        feed.on_event = watched  # type: ignore[method-assign]
        return feed

    port.ask = ask_and_watch  # type: ignore[method-assign]
    settings = ChatSettings(temperature=0.0, max_tokens=MAX_TOKENS)
    app = SpecmonApp(port, settings=settings)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_app(pilot, lambda: app.screen.connection is not None, frames=1200)
            assert port.connected, screen_text(app)
            header = screen_text(app).splitlines()[0]
            assert "SIMULATED" not in header and "model tiny" in header
            await _type(pilot, "Tell me about the river and the town.")
            views = lambda: list(app.screen.query(AnswerView))  # noqa: E731
            await wait_for_app(pilot, lambda: bool(views()) and views()[0].finished, frames=1200)
            # The numbers are refreshed for a moment after the end; the server's AL is first.
            await wait_for_app(pilot, lambda: "(server)" in screen_text(app), frames=200)
            await pilot.pause(0.3)
            with lock:
                assert len(ends) == 1
                end = ends[0]
            assert end.outcome == "ok"
            spec = end.spec_decoding
            assert spec is not None, "vLLM ran with detailed per-request metrics"
            assert spec["num_spec_tokens"] == 4 and spec["num_spec_steps"] > 0
            text = screen_text(app)
            al_line = next(line for line in text.splitlines() if " tokens · " in line)
            assert f"{end.completion_tokens} tokens" in al_line
            assert f"AL {spec['mean_acceptance_length']:.2f} (server)" in al_line, al_line
            assert f"accept {spec['draft_acceptance_rate']:.0%}" in al_line, al_line
            # The random model's text: all of it arrived and is what the widgets show, control
            # characters made visible; nothing raw reaches the screen; the app is still running.
            view = views()[0]
            arrived = arrived_text(feeds[0])
            assert arrived and view.text == arrived
            assert view.shown_text == visible(arrived)
            assert not CONTROL.search(text)
            words = [w for w in re.findall(r"[A-Za-z]{4,}", visible(arrived))]
            assert words, repr(arrived)
            assert all(w in text for w in words[:5]), (words[:5], text)
            assert app.is_running
    finally:
        port.close()


@pytest.mark.terminal
def test_a_real_vllm_chat_in_a_real_terminal(vllm_draft_noised: VllmServer, tmp_path) -> None:
    from tests.support.terminal import MISSING, SPECMON, TMUX, Terminal
    from tests.support.terminal_chat import quit_chat

    if TMUX is None or SPECMON is None:
        pytest.fail(MISSING)  # the real tier runs where the terminal tier runs
    server = vllm_draft_noised
    term = Terminal(
        f"{SPECMON} chat --attach {server.url} --temperature 0 --max-tokens {MAX_TOKENS}",
        tmp_path / "exit",
    )
    try:
        term.wait_for(lambda: server.url in term.screen(), "the connected header")
        title = term.title()
        term.type("Tell me about the river and the town.")
        term.key("Enter")
        term.wait_for(lambda: "(server)" in term.screen(), "the server's AL")
        screen = term.screen()
        line = next(x for x in screen.splitlines() if " tokens · " in x)
        assert re.search(r"AL \d\.\d\d \(server\)", line), line
        assert "SIMULATED" not in screen
        assert term.title() == title
        assert not CONTROL.search(screen)
        quit_chat(term)
    finally:
        term.close()
