"""The simulator's ground truth file (sim.truth; `specmon sim --truth`, `specmon demo --truth`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.sim.simtest_helpers import CHAT, chat_body, stream

from specmon.sim.drift import parse_drift
from specmon.sim.profiles import get_profile
from specmon.sim.schedule import parse_schedule
from specmon.sim.server import RunningSim, SimConfig, SimConfigError, start_in_thread
from specmon.sim.truth import context_cliff_tokens, cycle_period, expected_al, request_state


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_request_gets_its_engine_state_keyed_by_the_clients_request_id(
    start_sim: Callable[..., RunningSim], tmp_path: Path
) -> None:
    truth = tmp_path / "t.jsonl"
    sim = start_sim(
        seed=4, schedule="cycle:2f,1t,1d,1r,1f+restart", drift="garble:7", truth=str(truth)
    )
    for i in range(1, 8):
        chunks = stream(sim.url, chat_body(64, request_id=f"mine-{i}"))
        assert chunks[0]["id"] == f"chatcmpl-mine-{i}"  # as vLLM names a request by the field
    stream(sim.url, chat_body(64))  # a client that names none: the server's own id
    sim.stop()
    lines = _lines(truth)
    session = lines[0]
    assert session["kind"] == "session"
    assert session["cycle_period"] == 6
    assert session["garble_every"] == 7
    requests = [x for x in lines if x["kind"] == "request"]
    assert [x["request_id"] for x in requests[:7]] == [f"mine-{i}" for i in range(1, 8)]
    assert [x["state"] for x in requests[:7]] == [
        "fast",
        "fast",
        "transition",
        "degraded",
        "fast",  # recovery runs at 95% of fast acceptance
        "fast",
        "garbled",
    ]
    assert requests[3]["vanilla_ratio"] < 1.0 and requests[3]["expected_al"] == 1.0
    assert requests[7]["client_request_id"] is None
    assert requests[7]["request_id"] == requests[7]["server_id"]
    assert requests[7]["server_id"].startswith("chatcmpl-")
    restarts = [x for x in lines if x["kind"] == "restart"]
    assert [r["n"] for r in restarts] == [6]


def test_a_prompt_past_the_context_is_an_overflow_retry_line(
    start_sim: Callable[..., RunningSim], tmp_path: Path
) -> None:
    truth = tmp_path / "t.jsonl"
    sim = start_sim(truth=str(truth))
    long = " ".join(f"w{i}" for i in range(9000))
    body = chat_body(16, request_id="big", messages=[{"role": "user", "content": long}])
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        response = client.post(CHAT, json=body)
    assert response.status_code == 400
    sim.stop()
    refused = [x for x in _lines(truth) if x["kind"] == "request"]
    assert len(refused) == 1
    assert refused[0]["request_id"] == "big"
    assert refused[0]["state"] == "overflow-retry"
    assert "maximum context length" in refused[0]["reason"]


def test_a_request_id_that_is_not_a_string_is_refused(
    start_sim: Callable[..., RunningSim],
) -> None:
    sim = start_sim()
    with httpx.Client(base_url=sim.url, timeout=30) as client:
        response = client.post(CHAT, json=chat_body(8, request_id=5))
    assert response.status_code == 400
    assert "request_id" in response.text


def test_an_unwritable_truth_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SimConfigError, match="cannot write the truth file"):
        start_in_thread(SimConfig(truth=str(tmp_path / "missing" / "t.jsonl")))


def test_a_loop_and_the_context_drift_in_the_truth(
    start_sim: Callable[..., RunningSim], tmp_path: Path
) -> None:
    truth = tmp_path / "t.jsonl"
    sim = start_sim(seed=2, drift="loop:2,context:64:256", truth=str(truth))
    for i in range(1, 3):
        stream(sim.url, chat_body(512, request_id=f"r{i}"))
    sim.stop()
    lines = _lines(truth)
    assert lines[0]["context_cliff_tokens"] is not None
    assert 64 < lines[0]["context_cliff_tokens"] < 256
    first, second = (x for x in lines if x["kind"] == "request")
    assert first["state"] == "drifted"  # most of its 512 tokens past the drift's floor
    assert first["al_share"] < 0.7
    assert second["state"] == "loop"


def test_cycle_period_of_schedules() -> None:
    assert cycle_period(parse_schedule("cycle:5f,1t,3d,1r")) == 10
    assert cycle_period(parse_schedule("cycle:1f")) is None
    assert cycle_period(parse_schedule("cycle:5f,1d,5f,1d")) == 6
    assert cycle_period(parse_schedule("drop-at:5")) is None  # held, not a cycle
    assert cycle_period(None) is None


def test_state_rules_first_match_wins() -> None:
    base = {"phase": "f", "ratio": 3.0, "first_ratio": 3.0, "last_ratio": 3.0, "al_share": 1.0}
    assert request_state(loops=True, garbled=False, **base) == "loop"  # type: ignore[arg-type]
    assert request_state(loops=False, garbled=True, **base) == "garbled"  # type: ignore[arg-type]
    slow = {**base, "ratio": 1.05}
    assert request_state(loops=False, garbled=False, **slow) == "degraded"  # type: ignore[arg-type]
    straddled = {**base, "last_ratio": 1.0}
    assert (
        request_state(loops=False, garbled=False, **straddled)  # type: ignore[arg-type]
        == "transition"
    )
    drifted = {**base, "al_share": 0.5, "ratio": 1.5}
    assert request_state(loops=False, garbled=False, **drifted) == "drifted"  # type: ignore[arg-type]


def test_context_cliff_is_where_al_is_halfway_down() -> None:
    profile = get_profile("gemma4-26b-rtx5090m")
    drift = parse_drift("context:1000:3000:0.2")
    cliff = context_cliff_tokens(profile, 8, drift)
    assert cliff is not None and 1000 < cliff < 3000
    scale = 1 - (1 - 0.2) * (cliff - 1000) / 2000
    mid = (expected_al(profile, 8, 1.0) + expected_al(profile, 8, 0.2)) / 2
    assert expected_al(profile, 8, scale) == pytest.approx(mid, abs=0.01)
    assert context_cliff_tokens(profile, 8, parse_drift("loop:3")) is None


def test_demo_truth_is_keyed_by_the_recordings_request_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specmon.cli.main import main
    from specmon.core.events import RequestStarted
    from specmon.sources.recording_player import RecordingReader

    record, truth = tmp_path / "d.ndjson.gz", tmp_path / "d.truth.jsonl"
    demo = ["demo", "--requests", "3", "--speed", "50", "--max-tokens", "32", "--json"]
    status = main([*demo, "--record", str(record), "--truth", str(truth), "--drift", "garble:3"])
    capsys.readouterr()
    assert status == 0
    reader = RecordingReader(str(record), [])
    try:
        ids = [e.request_id for e in reader if isinstance(e, RequestStarted)]
    finally:
        reader.close()
    lines = _lines(truth)
    assert lines[0]["kind"] == "session" and lines[0]["cycle_period"] == 10
    requests = [x for x in lines if x["kind"] == "request"]
    assert [x["request_id"] for x in requests] == ids
    assert [x["state"] for x in requests] == ["fast", "fast", "garbled"]
