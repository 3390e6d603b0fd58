"""A live session against the simulator (hub + SessionState + recorder) and its replay into a
fresh SessionState give the same per-request numbers: derived numbers come from raw events only."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from specmon.core.clock import FakeClock
from specmon.core.events import Marker, ServerLogLine
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Monitor, Target
from specmon.runtime.prompt_loop import prompt_loop
from specmon.sources.recording_player import RecordingPlayer, read_recording
from specmon.sources.stream_client import ChatRequest

SECRET = "sk-planted-live-0123456789"


@pytest.mark.parametrize("name", ["live.ndjson", "live.ndjson.gz"])
def test_replay_reproduces_the_live_numbers(tmp_path, monkeypatch, name):
    monkeypatch.setenv("VLLM_API_KEY", SECRET)
    from specmon.sim.server import SimConfig, start_in_thread

    path = tmp_path / name
    with start_in_thread(
        SimConfig(speed=50.0, n_spec=8, schedule="cycle:5f,1t,3d,1r"), log_sink=lambda _l: None
    ) as sim:
        monitor = Monitor([Target(sim.url)], SessionState, interval=0.2, record=path)
        info = monitor.start()
        hub = monitor.hub
        requests = [ChatRequest(f"prompt {i}", max_tokens=48) for i in range(3)]
        hub.submit(
            prompt_loop(
                monitor.clients[0], requests, hub.emit, scraper=monitor.scrapers[0], count=10
            )
        ).result(120)
        hub.post(ServerLogLine(hub.clock(), sim.url, f"vllm serve m --api-key {SECRET}"))
        hub.post(Marker(hub.clock(), "end"))
        hub.submit(asyncio.sleep(0)).result(10)
        live = monitor.snapshot()
        monitor.stop()
    assert info.simulated is True
    live_rows = live["requests"]["rows"]
    assert len(live_rows) == 10
    assert sum(r["vanilla"]["flagged"] for r in live_rows) >= 3  # the cycle's degraded phase

    recording = read_recording(path)
    assert recording.problems == []
    assert recording.info.simulated is True
    raw = path.read_bytes()
    text = raw.decode("latin-1") if not name.endswith(".gz") else ""
    assert SECRET not in text
    assert not any(SECRET in getattr(e, "line", "") for e in recording.events)

    replayed = SessionState(recording.info)
    player = RecordingPlayer(path)
    asyncio.run(player.run(replayed.apply))
    again = replayed.snapshot()
    assert again["requests"]["rows"] == live_rows
    assert again["requests"]["summary"] == live["requests"]["summary"]
    assert again["cycle"] == live["cycle"]
    for src, server in live["servers"].items():
        for key in ("acceptance_length", "per_position_rates", "totals", "counter_resets"):
            assert again["servers"][src][key] == server[key]
    json.dumps(again)  # still JSON-ready


def test_paced_replay_keeps_the_original_gaps(tmp_path):
    from specmon.runtime.recorder import Recorder

    path = tmp_path / "p.ndjson"
    with Recorder(path, _info(), clock=FakeClock()) as rec:
        for t in (0.0, 1.0, 3.0):
            rec.write(Marker(t, f"m{t}"))
    clock = FakeClock(50.0)
    waits: list[float] = []

    async def sleep(s):
        waits.append(s)
        clock.advance(s)

    seen: list = []
    player = RecordingPlayer(path, speed=2.0, clock=clock, sleep=sleep)
    asyncio.run(player.run(seen.append))
    assert waits == [0.5, 1.0]
    assert [e.t for e in seen] == [0.0, 1.0, 3.0]


def _info():
    from specmon.core.events import SessionInfo

    return SessionInfo(model="m")


def test_no_threads_left_after_stop(sim):
    before = {t.ident for t in threading.enumerate()}
    monitor = Monitor([Target(sim.url)], SessionState, interval=0.2)
    monitor.start()
    monitor.stop()
    after = {t.ident for t in threading.enumerate() if t.is_alive()}
    assert after <= before
