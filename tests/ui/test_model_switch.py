"""Switching the model among those the server lists (the chat screen's ctrl+t): the dialog lists
the server's models (names shown literally), the pick goes to the port, the header shows it,
the next question is asked of it, and the conversation is saved with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.ui_fakes import SIM_SERVER, FakePort, as_port, screen_text
from tests.support.waiting import wait_for_app
from tests.ui.chat_pilot import SIZE
from tests.ui.chat_pilot import answers as _answers
from tests.ui.chat_pilot import ask as _ask
from tests.ui.chat_pilot import connected as _connected
from textual.widgets import OptionList

from specmon.core.events import SessionInfo
from specmon.runtime.collector_messages import ServerSeen
from specmon.sources.conversation_store import ConversationStore
from specmon.ui.app import SpecmonApp
from specmon.ui.live_port import LivePort
from specmon.ui.port import Ask
from specmon.ui.saved_chats import chat_history_for, chat_scrubber, close_history
from specmon.ui.screens.dialogs import ModelScreen

OTHER = "other/model-7b"
HOSTILE = "evil\x1b[31mred"


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data" / "specmon" / "chats.sqlite"


def _port(served: tuple[str, ...]) -> FakePort:
    port = FakePort(answers=[["one."], ["two."]])
    port.served = served
    return as_port(port)  # type: ignore[return-value]


@pytest.mark.slow
async def test_ctrl_k_switches_the_model_for_the_next_question_and_it_is_saved(
    data_home: Path,
) -> None:
    port = _port((SIM_SERVER.model, OTHER, HOSTILE))
    app = SpecmonApp(port)
    history = chat_history_for(False, None, chat_scrubber(None, (), ()))
    app.chat_history = history
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1 and _answers(app)[0].finished)
        await pilot.press("ctrl+t")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ModelScreen))
        listed = app.screen.query_one(OptionList)
        prompts = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
        assert prompts == [f"● {SIM_SERVER.model}", f"  {OTHER}", "  evil␛[31mred"]
        assert listed.highlighted == 0  # the current model
        await pilot.press("down", "enter")
        await wait_for_app(pilot, lambda: not isinstance(app.screen, ModelScreen))
        assert port.server is not None and port.server.model == OTHER
        text = screen_text(app)
        assert f"model: {OTHER} (from the next question)" in text
        assert f"model {OTHER}" in text.splitlines()[0]  # the header
        await _ask(pilot, "again")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 2 and _answers(app)[1].finished)
    close_history(history)
    with ConversationStore(data_home, create=False) as store:
        (summary,) = store.search()
        conv = store.load(summary.id)
    assert conv.server.model == OTHER
    assert [t.prompt for t in conv.turns] == ["hi", "again"]


async def test_a_server_listing_one_model_only_says_so() -> None:
    port = _port(())
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert not isinstance(app.screen, ModelScreen)
        assert f"the server lists no other model than {SIM_SERVER.model}" in screen_text(app)


async def test_esc_in_the_dialog_keeps_the_model() -> None:
    port = _port((SIM_SERVER.model, OTHER))
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+t")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press("down", "escape")
        await wait_for_app(pilot, lambda: not isinstance(app.screen, ModelScreen))
        assert port.server is not None and port.server.model == SIM_SERVER.model


class _StubSession:
    """A LiveSession that identified one server listing two models; it keeps what it is asked."""

    def __init__(self) -> None:
        self.servers = (
            ServerSeen(
                "http://127.0.0.1:9",
                ("first", OTHER),
                None,
                context_lengths=(("first", 4096), (OTHER, 32768)),
            ),
        )
        self.requests: list[object] = []
        self.alive = True

    def start(self) -> SessionInfo:
        return SessionInfo(server="http://127.0.0.1:9", model="first")

    def subscribe(self, _callback: object) -> None:
        pass

    def submit_chat(self, request: object, *, request_id: str) -> None:
        self.requests.append(request)

    def stop(self) -> None:
        pass


def test_the_live_port_asks_the_switched_model_and_refuses_one_not_listed() -> None:
    session = _StubSession()
    port = LivePort(lambda: session)  # type: ignore[arg-type,return-value]
    connection = port.connect()
    assert connection.server is not None and connection.server.model == "first"
    assert port.models == ("first", OTHER)
    port.ask(Ask("q1"))
    chosen = port.use_model(OTHER)
    assert (chosen.model, chosen.max_model_len) == (OTHER, 32768)
    port.ask(Ask("q2"))
    assert [r.model for r in session.requests] == ["first", OTHER]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="does not list model 'nope'"):
        port.use_model("nope")
    assert port.server == chosen  # unchanged by the refused switch
