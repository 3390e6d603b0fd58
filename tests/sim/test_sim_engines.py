"""The simulator's data-parallel engines (`SimConfig(engines=N)`, `specmon sim --engines N`): one
`engine` label per rank on every engine family, requests served round-robin, each engine's
counters its own; and through the monitor's read model, one EngineView per engine whose numbers
add up to the server's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.sim.simtest_helpers import chat_body, stream

from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, SimConfigError, resolve, start_in_thread


def _by_engine(url: str, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics").text):
        for s in family.samples:
            if s.name == name:
                e = s.labels["engine"]
                out[e] = out.get(e, 0.0) + s.value
    return out


def test_two_engines_each_count_their_own_requests(start_sim) -> None:
    sim = start_sim(engines=2, seed=3)
    gen = "vllm:generation_tokens_total"
    assert _by_engine(sim.url, gen) == {"0": 0.0, "1": 0.0}
    stream(sim.url, chat_body(max_tokens=40))  # request 1 → engine 0
    after_one = _by_engine(sim.url, gen)
    assert after_one["0"] > 0 and after_one["1"] == 0
    stream(sim.url, chat_body(max_tokens=40))  # request 2 → engine 1
    after_two = _by_engine(sim.url, gen)
    assert after_two["0"] == after_one["0"] and after_two["1"] > 0
    drafts = _by_engine(sim.url, "vllm:spec_decode_num_drafts_total")
    assert set(drafts) == {"0", "1"} and all(v > 0 for v in drafts.values())
    assert set(_by_engine(sim.url, "vllm:num_requests_running")) == {"0", "1"}
    assert set(_by_engine(sim.url, "vllm:cache_config_info")) == {"0", "1"}


def test_one_engine_is_the_default_and_bad_counts_are_refused(start_sim) -> None:
    sim = start_sim()
    assert set(_by_engine(sim.url, "vllm:generation_tokens_total")) == {"0"}
    for bad in (0, 17):
        with pytest.raises(SimConfigError, match=r"engines must be 1\.\.16"):
            resolve(SimConfig(engines=bad))


def test_the_read_model_shows_each_engine_and_they_sum_to_the_server() -> None:
    with start_in_thread(SimConfig(engines=2, speed=50.0, seed=4), log_sink=lambda _l: None) as sim:
        session = CollectorProcess(
            SessionConfig(targets=(Target(sim.url),), interval=0.2), SessionState
        )
        session.start()
        try:
            for _ in range(4):
                stream(sim.url, chat_body(max_tokens=60))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                server = session.view(fresh=True).servers[0]
                if (
                    all(e.decode_tok_s for e in server.engine_numbers)
                    and len(server.engine_numbers) == 2
                ):
                    break
                time.sleep(0.1)
            assert server.engines == ("0", "1")
            e0, e1 = server.engine_numbers
            assert e0.decode_tok_s and e1.decode_tok_s
            assert e0.decode_tok_s + e1.decode_tok_s == pytest.approx(server.window.decode_tok_s)
            assert e0.acceptance_length is not None and e1.acceptance_length is not None
        finally:
            session.stop()


def test_the_command_refuses_a_bad_engine_count_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "specmon", "sim", "--engines", "0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "specmon sim: engines must be 1..16, got 0"
