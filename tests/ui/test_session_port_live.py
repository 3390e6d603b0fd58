"""The port over a CollectorProcess (the collector in its own process): the published view, the
answer's row, recording started and stopped while the session runs, markers."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from tests.support.loopback import SilentServer
from tests.support.ui_fakes import sim_port
from tests.support.waiting import wait_for

from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig
from specmon.ui.live_port import LivePort
from specmon.ui.port import Ask, Connection


def test_the_view_is_published_from_the_collectors_events_and_the_row_has_a_class() -> None:
    with sim_port(SimConfig(speed=50.0, seed=1)) as (port, _url):
        assert port.connect().server is not None
        feed = port.ask(Ask("hello", max_tokens=40))
        ended = []
        wait_for(
            lambda: ended.append(feed.drain().ended) or any(ended), "the answer's end", timeout=30
        )
        rid = feed.request_id

        def row():
            view = port.view()
            return next((r for r in view.rows if r.request_id == rid), None) if view else None

        wait_for(lambda: row() is not None, "the request's row", timeout=30)
        r = row()
        assert r.completion_tokens == 40
        # one request: one level, so its class is ok; when every token came in one chunk (the
        # machine busy) there is no decode time to class, and the answer has no speed class
        if r.decode_tok_s is None:
            assert r.speed_class is None
        else:
            assert r.speed_class is not None and r.speed_class.kind == "ok"
        numbers = port.numbers(feed)
        assert numbers.tokens == 40 and numbers.request_id == rid
        assert port.now() > 0


def test_recording_starts_and_stops_while_the_session_runs_with_a_marker(tmp_path: Path) -> None:
    path = tmp_path / "session.ndjson"
    with sim_port(SimConfig(speed=50.0, seed=1)) as (port, _url):
        assert port.connect().server is not None
        assert port.recording is None
        assert port.start_recording(str(path)) == str(path)
        assert port.recording == str(path)
        with pytest.raises(RuntimeError, match="already recording"):
            port.start_recording(str(tmp_path / "other.ndjson"))
        port.mark("slow here")
        feed = port.ask(Ask("hello", max_tokens=20))
        ended = []
        wait_for(
            lambda: ended.append(feed.drain().ended) or any(ended), "the answer's end", timeout=30
        )
        time.sleep(0.3)  # the marker and the request's events reach the collector's recorder
        assert port.stop_recording() == str(path)
        assert port.recording is None
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert lines[0]["format"] == "specmon-session"
        markers = [e for e in lines[1:] if e[1] == "m"]
        assert markers and markers[0][2]["label"] == "slow here"
        assert any(e[1] != "m" for e in lines[1:])
        # a file that exists is refused with the reason, and the session goes on
        with pytest.raises(RuntimeError, match="already exists"):
            port.start_recording(str(path))
        assert port.connected


def test_the_dashboard_port_keeps_a_server_that_is_down_and_shows_it_down() -> None:
    import socket

    from specmon.runtime.baseline import state_factory
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import CollectorProcess, SessionConfig
    from specmon.ui.live_port import LivePort

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        config = SessionConfig((Target(dead),), interval=0.2)
        port = LivePort(lambda: CollectorProcess(config, state_factory(None)), require_model=False)
        try:
            assert port.connect().server is not None  # watch: shown, not refused
            wait_for(
                lambda: bool((v := port.view()) and v.servers and v.servers[0].status == "down"),
                "the server down in the view",
                timeout=30,
            )
        finally:
            port.close()
    assert not port.connected


def test_abort_abandons_a_connection_still_being_made_and_refuses_the_next() -> None:
    silent = SilentServer()
    made: list[CollectorProcess] = []

    def make() -> CollectorProcess:
        made.append(CollectorProcess(SessionConfig((Target(silent.url),)), SessionState))
        return made[-1]

    port = LivePort(make, require_model=False)
    result: list[Connection] = []
    connecting = threading.Thread(target=lambda: result.append(port.connect()), daemon=True)
    try:
        connecting.start()
        wait_for(lambda: bool(made) and made[0].pid is not None, "the collector's pid", timeout=30)
        port.abort()  # the server has answered nothing: the collector cannot have said hello
        connecting.join(30)
        assert not connecting.is_alive()
        assert result[0].server is None and result[0].error
        assert not port.connected
        again = port.connect()
        assert again.server is None and again.error == "the app is closing"
        assert len(made) == 1  # no collector is even made once the app is closing
    finally:
        port.close()
        silent.stop()
