"""The simulator's drifts (`--drift`, sim/drift.py) produce the effects that the diagnosis
(docs/diagnosis.md) views look for, and the views find them there and not on the plain simulator."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from tests.sim.simtest_helpers import CHAT, chat_body, stream

from specmon.core.events import (
    Event,
    GpuReading,
    GpuSampled,
    RequestEnded,
    RequestStarted,
    SessionInfo,
    StreamChunk,
)
from specmon.core.session_state import SessionState
from specmon.sim import drift as sim_drift
from specmon.sim.profiles import get_profile
from specmon.sim.server import RunningSim, SimConfig, SimConfigError, resolve, start_in_thread
from specmon.sim.step_model import expected_output_throughput

SRC = "http://sim"


def _events(rid: str, chunks: list[Any], times: list[float], t0: float) -> list[Event]:
    """The events a stream client makes of one streamed answer (chunks and their arrival)."""
    events: list[Event] = [RequestStarted(t=t0, request_id=rid, source=SRC, model="m")]
    prompt = None
    for chunk, t in zip(chunks, times, strict=True):
        if chunk == "[DONE]":
            continue
        usage = chunk.get("usage") or {}
        prompt = usage.get("prompt_tokens", prompt)
        if not chunk["choices"]:
            events.append(
                RequestEnded(
                    t=t,
                    request_id=rid,
                    prompt_tokens=prompt,
                    completion_tokens=usage.get("completion_tokens"),
                )
            )
            continue
        choice = chunk["choices"][0]
        events.append(
            StreamChunk(
                t=t,
                request_id=rid,
                text=choice["delta"].get("content") or "",
                completion_tokens=usage.get("completion_tokens"),
                prompt_tokens=prompt,
                finish_reason=choice.get("finish_reason"),
            )
        )
    return events


def _fake_timed(sim: RunningSim, n: int, max_tokens: int) -> list[Event]:
    """n answers from a fake-paced sim (token counts and text only; times are made up)."""
    events: list[Event] = []
    for i in range(n):
        chunks = stream(sim.url, chat_body(max_tokens=max_tokens))
        times = [i * 100.0 + j * 0.01 for j in range(len(chunks))]
        events += _events(f"r{i}", chunks, times, i * 100.0)
    return events


def _fold(events: list[Event], n_spec: int, baseline: float | None = None) -> SessionState:
    state = SessionState(SessionInfo(n_spec=n_spec, simulated=True), baseline_tok_s=baseline)
    for e in events:
        state.apply(e)
    return state


# ------------------------------------------------------------------ parsing


def test_drift_specs_parse_and_bad_ones_fail_in_one_line() -> None:
    d = sim_drift.parse_drift("context:8192:20480, uptime:3600, thermal, loop:5")
    assert (d.context_lo, d.context_hi, d.context_floor) == (8192, 20480, 0.35)
    assert d.uptime_half_life_s == 3600.0 and d.heat_s == 120.0 and d.loop_every == 5
    assert d.acceptance_scale(100, 0.0) == 1.0
    assert d.acceptance_scale(30_000, 3600.0) == pytest.approx(0.35 * 0.5)
    for bad in ("context:9:3", "context:x:9", "uptime:-1", "loop", "heat:3", "context:1:9:2"):
        with pytest.raises(SimConfigError) as info:
            resolve(SimConfig(drift=bad))
        assert "\n" not in str(info.value)


def test_the_gpu_heats_and_its_clock_falls_from_85_to_91_degrees() -> None:
    cool = sim_drift.gpu_state(10.0, 0.0, 1)
    hot = sim_drift.gpu_state(10.0, 10.0, 1)
    assert (cool.temperature_c, cool.sm_clock_mhz) == (45.0, 1725)
    assert (hot.temperature_c, hot.sm_clock_mhz) == (91.0, 1365)
    assert sim_drift.step_stretch(hot) == pytest.approx(1725 / 1365)
    assert sim_drift.gpu_state(None, 1e6, 1).sm_clock_mhz == 1725


# ------------------------------------------------------------------ acceptance vs context


def test_acceptance_falls_with_context_and_the_cliff_is_found(start_sim) -> None:
    sim = start_sim(seed=1, drift="context:512:1024")
    view = _fold(_fake_timed(sim, 10, 1600), n_spec=8).view().diagnosis  # 10: a cliff needs answers
    assert view is not None
    cliff = view.context
    assert cliff.detected, cliff
    assert cliff.al_below is not None and cliff.al_past is not None
    assert cliff.al_below > 3.0 and cliff.al_past < 1.8
    assert cliff.below_tokens is not None and cliff.below_tokens <= 1024
    assert cliff.past_tokens is not None and cliff.past_tokens >= 512
    assert cliff.summary.startswith(f"AL {cliff.al_below:.1f} below")


def test_the_plain_simulator_has_no_context_cliff(start_sim) -> None:
    sim = start_sim(seed=1)
    view = _fold(_fake_timed(sim, 3, 1600), n_spec=8).view().diagnosis
    assert view is not None and view.context.steps > 300
    assert not view.context.detected


def test_acceptance_decays_with_uptime(start_sim) -> None:
    sim = start_sim(seed=2, drift="uptime:2")  # half-life 2 model seconds
    first = stream(sim.url, chat_body(max_tokens=400))
    for _ in range(4):
        stream(sim.url, chat_body(max_tokens=400))
    last = stream(sim.url, chat_body(max_tokens=400))

    def steps(chunks: list[Any]) -> int:
        return sum(1 for c in chunks if c != "[DONE]" and c["choices"])

    assert steps(last) > 1.5 * steps(first)  # lower acceptance: more steps for the same tokens


# ------------------------------------------------------------------ quality sentinel


def test_a_looping_answer_is_flagged_and_plain_answers_are_not(start_sim) -> None:
    sim = start_sim(seed=3, drift="loop:4")
    q = _fold(_fake_timed(sim, 8, 300), n_spec=8).view().diagnosis
    assert q is not None
    assert q.quality.checked == 8
    assert [v.request_id for v in q.quality.flagged] == ["r3", "r7"]
    assert all(v.flag == "loop" for v in q.quality.flagged)
    assert all((v.repeated_ngram_share or 0) > 0.9 for v in q.quality.flagged)
    plain = _fold(_fake_timed(start_sim(seed=3), 8, 300), n_spec=8).view().diagnosis
    assert plain is not None and plain.quality.checked == 8 and not plain.quality.flagged


# ------------------------------------------------------------------ real pacing: times matter

PROFILE = "gemma4-26b-rtx5090"  # K=13, AL ~10: spec is ~2.6x vanilla, a 'd' answer ~0.26x
SPEED = 2.0


def _timed(sim: RunningSim, n: int, max_tokens: int, gpu: bool = False) -> list[Event]:
    """n answers read as they arrive, stamped on arrival; with `gpu`, a GPU sample of the sim's
    simulated GPU before each chunk (as a sampler would take them while it runs)."""
    events: list[Event] = []
    with httpx.Client(base_url=sim.url, timeout=60) as client:
        for i in range(n):
            t0 = time.monotonic()
            chunks: list[Any] = []
            times: list[float] = []
            body = chat_body(max_tokens=max_tokens)
            with client.stream("POST", CHAT, json=body) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    now = time.monotonic()
                    data = line[len("data: ") :]
                    if gpu and data != "[DONE]":
                        s = sim.app.engine.gpu_state()
                        reading = GpuReading(
                            index=0,
                            temperature_c=s.temperature_c,
                            power_w=s.power_w,
                            power_limit_w=s.power_limit_w,
                            sm_clock_mhz=float(s.sm_clock_mhz),
                        )
                        events.append(GpuSampled(t=now, source="gpu", gpus=(reading,)))
                    chunks.append(data if data == "[DONE]" else json.loads(data))
                    times.append(now)
            events += _events(f"r{i}", chunks, times, t0)
    events.sort(key=lambda e: e.t)
    return events


def _paced(**fields: Any) -> RunningSim:
    return start_in_thread(
        SimConfig(profile=PROFILE, speed=SPEED, log_interval=0.0, **fields),
        log_sink=lambda _line: None,
    )


@pytest.mark.slow
def test_a_throttled_gpu_is_named_as_the_cause_of_the_slowdown() -> None:
    with _paced(seed=4, drift="thermal:1.2") as sim:
        events = _timed(sim, 15, 160, gpu=True)
    t = _fold(events, n_spec=13).view().diagnosis
    assert t is not None
    th = t.thermal
    assert th.slow and th.cause == "clock", th
    assert th.now_clock_mhz is not None and th.now_clock_mhz < 1400
    # The reference is the earlier answers measured fastest: on a loaded machine a cool answer
    # can read slow and a warming one take its place, so the reference clock is at most the cool
    # GPU's 1725 MHz and above the throttled one, not always 1725 MHz.
    assert th.ref_clock_mhz is not None and th.now_clock_mhz < th.ref_clock_mhz <= 1725
    assert "the GPU clock fell" in th.summary and "91 °C" in th.summary


@pytest.mark.slow
def test_a_cool_gpu_is_not_blamed() -> None:
    with _paced(seed=4) as sim:
        events = _timed(sim, 15, 160, gpu=True)
    t = _fold(events, n_spec=13).view().diagnosis
    assert t is not None and t.thermal.cause != "clock"


@pytest.mark.slow
def test_degraded_answers_cost_time_against_vanilla_and_fast_ones_save_it() -> None:
    vanilla = expected_output_throughput(get_profile(PROFILE), 0, 17, 160) * SPEED
    with _paced(seed=5, schedule="cycle:2f,1d") as sim:
        events = _timed(sim, 6, 160)
    d = _fold(events, n_spec=13, baseline=vanilla).view().diagnosis
    assert d is not None
    s = d.seconds_saved
    assert s.answers == 6
    costly = [a.request_id for a in s.recent if a.cost]
    assert costly == ["r2", "r5"]
    assert all(a.reason for a in s.recent if a.cost)
    assert all(a.saved_s > 0 for a in s.recent if not a.cost)
    assert s.saved_s == pytest.approx(sum(a.saved_s for a in s.recent))


def test_a_garbled_answer_on_a_good_drafter_is_flagged(start_sim) -> None:
    # Request 10 is symbol soup at no acceptance after nine at the profile's AL ~3.7.
    sim = start_sim(seed=6, drift="garble:10")
    q = _fold(_fake_timed(sim, 10, 300), n_spec=8).view().diagnosis
    assert q is not None
    assert [(v.request_id, v.flag) for v in q.quality.flagged] == [("r9", "garbled")]
    z = q.quality.flagged[0].al_z
    assert z is not None and z <= -3


def test_an_answer_that_fell_to_vanilla_speed_is_not_called_garbled(start_sim) -> None:
    # The demo's cycle: request 10 is degraded (AL 1.0) but its text is ordinary.
    sim = start_sim(seed=6, schedule="cycle:9f,1d")
    q = _fold(_fake_timed(sim, 10, 300), n_spec=8).view().diagnosis
    assert q is not None and q.quality.flagged == ()
    assert q.quality.checked == 10


@pytest.mark.parametrize("spec", ["uptime:inf", "thermal:1e999", "uptime:nan", "loop:2.5"])
def test_a_drift_number_that_is_not_finite_or_whole_is_refused(spec: str) -> None:
    with pytest.raises(sim_drift.DriftError, match="bad number"):
        sim_drift.parse_drift(spec)
