"""runtime.session: the LiveSession API, its collector in a process of its own.

Against the simulator: a chat submitted through the session is folded into its state, a marker
reaches the recording, stop() closes the recording and leaves no process; the collector process
dies with its parent even when the parent is killed (SIGKILL: no clean-up code runs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.support.loopback import SilentServer
from tests.support.waiting import wait_for

from specmon.core.events import Marker, RequestEnded, StreamChunk
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.recording_player import read_recording
from specmon.sources.stream_client import ChatRequest

WAIT_S = 60.0  # bound on waiting for an answer or an exit; not a timing assertion


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("kind", [CollectorProcess])
def test_a_chat_through_the_session_is_folded_marked_and_recorded(sim, tmp_path, kind):
    path = tmp_path / "s.ndjson"
    config = SessionConfig(targets=(Target(sim.url),), interval=0.3, record=str(path))
    session = kind(config, SessionState)
    ended = threading.Event()
    seen: list[RequestEnded] = []

    def on_event(event: object) -> None:
        if isinstance(event, RequestEnded):
            seen.append(event)
            ended.set()

    info = session.start()
    pid = getattr(session, "pid", None)
    try:
        assert info.simulated is True
        session.subscribe(on_event)
        rid = session.submit_chat(ChatRequest("Count to five.", max_tokens=24))
        assert ended.wait(WAIT_S)
        session.mark("after the first answer")
        rows = session.snapshot()["requests"]["rows"]
    finally:
        session.stop()
    assert [e.request_id for e in seen] == [rid]
    assert [(r["request_id"], r["outcome"], r["completion_tokens"]) for r in rows] == [
        (rid, "ok", 24)
    ]
    recording = read_recording(path)
    assert recording.problems == []
    assert [e.label for e in recording.events if isinstance(e, Marker)] == [
        "after the first answer"
    ]
    ends = [e for e in recording.events if isinstance(e, RequestEnded)]
    assert [(e.request_id, e.completion_tokens) for e in ends] == [(rid, 24)]
    if pid is not None:
        assert not _alive(pid)


def test_cancel_ends_a_streaming_request_as_cancelled():
    slow = start_in_thread(SimConfig(speed=0.5, n_spec=8, seed=1), log_sink=lambda _l: None)
    session = CollectorProcess(SessionConfig(targets=(Target(slow.url),)), SessionState)
    got: list[RequestEnded] = []
    streaming = threading.Event()
    ended = threading.Event()

    def on_event(event: object) -> None:
        if isinstance(event, StreamChunk):
            streaming.set()
        if isinstance(event, RequestEnded):
            got.append(event)
            ended.set()

    session.start()
    try:
        session.subscribe(on_event)
        rid = session.submit_chat(ChatRequest("A long story, please.", max_tokens=4000))
        assert streaming.wait(WAIT_S)
        session.cancel(rid)  # like Esc during an answer
        assert ended.wait(WAIT_S)
    finally:
        session.stop()
        slow.stop()
    assert [(e.request_id, e.outcome) for e in got] == [(rid, "cancelled")]


def test_a_collector_started_from_a_thread_outlives_that_thread(tmp_path):
    """The app starts its session from a worker thread that ends when the app quits, before the
    session is stopped: the collector must still stop cleanly then, so the answer cut by the quit
    is recorded as cancelled (it was killed with the thread: the answer had no end)."""
    slow = start_in_thread(SimConfig(speed=0.5, n_spec=8, seed=1), log_sink=lambda _l: None)
    path = tmp_path / "quit.ndjson"
    session = CollectorProcess(
        SessionConfig(targets=(Target(slow.url),), record=str(path)), SessionState
    )
    streaming = threading.Event()
    try:
        worker = threading.Thread(target=session.start)
        worker.start()
        worker.join(WAIT_S)
        assert session.info is not None, "the session did not start"
        session.subscribe(lambda e: isinstance(e, StreamChunk) and streaming.set())
        rid = session.submit_chat(ChatRequest("A long story, please.", max_tokens=4000))
        assert streaming.wait(WAIT_S)
        assert _alive(session.pid)
    finally:
        session.stop()  # as the app's quit does, after the thread has ended
        slow.stop()
    ends = [e for e in read_recording(path).events if isinstance(e, RequestEnded)]
    assert [(e.request_id, e.outcome) for e in ends] == [(rid, "cancelled")]
    assert session.errors == []


def test_the_collector_process_dies_with_a_killed_parent(sim):
    code = (
        "import sys\n"
        "from specmon.core.session_state import SessionState\n"
        "from specmon.runtime.monitor import Target\n"
        "from specmon.runtime.session import CollectorProcess, SessionConfig\n"
        "if __name__ == '__main__':\n"
        f"    s = CollectorProcess(SessionConfig(targets=(Target({sim.url!r}),)), SessionState)\n"
        "    s.start()\n"
        "    print(s.pid, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(WAIT_S)
        gone = threading.Event()

        def poll() -> None:
            while _alive(child):
                gone.wait(0.05)
            gone.set()

        threading.Thread(target=poll, daemon=True).start()
        assert gone.wait(WAIT_S), f"collector {child} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_collector_still_starting_is_ended_when_stopped_from_another_thread():
    silent = SilentServer()
    session = CollectorProcess(SessionConfig(targets=(Target(silent.url),)), SessionState)
    outcome: list[BaseException | object] = []

    def start() -> None:
        try:
            outcome.append(session.start())
        except BaseException as exc:
            outcome.append(exc)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    try:
        while session.pid is None:
            threading.Event().wait(0.01)
        pid = session.pid
        session.stop()  # before the server has answered anything: no hello can have come
        assert not _alive(pid)
        starter.join(WAIT_S)
        assert not starter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
        assert session.errors == []  # ended on purpose, not "did not stop in time"
    finally:
        silent.stop()


def test_a_message_of_no_known_kind_on_the_pipe_is_refused_not_fatal(sim):
    """Both ends of the collector pipe take only their typed messages: anything else (here the
    tuple a chat command used to be) is noted in one line, and the session goes on."""
    session = CollectorProcess(
        SessionConfig(targets=(Target(sim.url),), interval=0.3), SessionState
    )
    session.start()
    try:
        conn = session._conn
        assert conn is not None
        conn.send(("chat", "r1"))  # not a command: the collector must not die of it
        session.mark("still here")
        for _ in range(int(WAIT_S / 0.05)):
            labels = [m["label"] for m in session.snapshot()["markers"]]
            if "still here" in labels:
                break
            time.sleep(0.05)
        assert "still here" in labels
        assert session.alive
    finally:
        session.stop()
    assert any("unknown kind tuple" in e for e in session.errors), session.errors


def test_the_receiver_refuses_a_report_of_no_known_kind():
    import multiprocessing

    from specmon.runtime.collector_messages import Stopped

    session = CollectorProcess(SessionConfig(targets=()), SessionState)
    ours, theirs = multiprocessing.Pipe()
    session._conn = ours
    theirs.send(("events", []))  # the old untyped form
    theirs.send(Stopped(("hub: an error",)))
    session._receive()  # returns at Stopped, instead of dying on the tuple
    assert session.errors == [
        "collector pipe: ignored a message of unknown kind tuple",
        "hub: an error",
    ]


@pytest.mark.parametrize("kind", [CollectorProcess])
def test_the_servers_context_length_comes_with_its_identity(sim, kind):
    """The context length of the model is read from the same /v1/models answer that identified
    the server (the app asked /v1/models a second time for it after the start)."""
    session = kind(SessionConfig(targets=(Target(sim.url),)), SessionState)
    session.start()
    try:
        seen = session.servers[0]
    finally:
        session.stop()
    assert seen.models and seen.context_length(seen.models[0]) == 8192
    assert seen.context_length("not-listed") is None


def test_a_hosted_servers_log_lines_reach_the_state_and_the_recording_without_its_secrets(
    tmp_path,
):
    """`specmon serve` on a terminal opens the session before vLLM starts and hands it every
    line vLLM prints (`post_log`): folded as the server's log, recorded, and the values of the
    server's command line (`SessionConfig.secrets`) are in neither the recording nor its header."""
    from specmon.core.events import ServerLogLine
    from specmon.runtime.session import open_session

    secret = "tok-0123456789abcdef"
    path = tmp_path / "serve.ndjson"
    session = open_session(SessionConfig((), record=str(path), quiet=True, secrets=(secret,)))
    seen: list[ServerLogLine] = []
    session.subscribe(lambda e: seen.append(e) if isinstance(e, ServerLogLine) else None)
    session.start()
    try:
        session.post_log("http://127.0.0.1:8000", "INFO Starting vLLM API server")
        session.post_log("http://127.0.0.1:8000", f"args: --api-key {secret}")
        wait_for(lambda: len(seen) == 2, "both lines folded", timeout=WAIT_S)
    finally:
        session.stop()
    session.post_log("http://127.0.0.1:8000", "after the stop: dropped, no error")
    assert seen[0].line == "INFO Starting vLLM API server"
    assert {e.source for e in seen} == {"http://127.0.0.1:8000"}
    text = path.read_text()
    assert secret not in text
    lines = [e.line for e in read_recording(path).events if isinstance(e, ServerLogLine)]
    assert lines[0] == "INFO Starting vLLM API server" and lines[1].startswith("args: --api-key")
