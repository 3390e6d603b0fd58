"""`specmon bench` against the simulated server: the run, the recording and its replay, soak
errors, an engine that dies, and the degradation cycle a schedule sets. Fast on 2 cores: high
--speed, few requests (the simulator divides every duration by the speed: tok/s are speed x
model)."""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from tests.support.fake_nvml import FakeGpu, FakeNvml

from specmon.bench.analysis import analyze
from specmon.bench.config import BenchConfig
from specmon.bench.result import load_result
from specmon.bench.runner import BenchError, NoProgress, run_bench
from specmon.bench.servers import endpoint_for
from specmon.cli.main import main
from specmon.core.detectors.cycle import detect_cycle
from specmon.sim.profiles import PROFILES
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.gpu.nvml import NvmlSampler


@contextmanager
def sim(**kwargs) -> Iterator:
    with start_in_thread(SimConfig(**kwargs), log_sink=lambda _line: None) as s:
        yield s


def bench(url: str, config: BenchConfig, **kwargs):
    out = asyncio.run(run_bench(endpoint_for(url), config, **kwargs))
    return out, analyze(out.events, server=out.server, config=config)


def test_bench_run_against_the_simulator() -> None:
    config = BenchConfig(input_len=64, output_len=128, num_prompts=4, warmups=1, ignore_eos=True)
    with sim(profile="gemma4-26b-rtx5090m", n_spec=8, speed=50.0, seed=3) as s:
        out, result = bench(s.url, config)
    # random prompts were sized with the server's /tokenize to exactly 64 tokens
    assert [p.input_tokens for p in out.prompts] == [64] * 5
    assert result.server.simulated and result.server.n_spec == 8
    assert result.server.spec_configured is True
    s_ = result.summary
    assert (s_.completed, s_.failed, s_.total_output_tokens) == (4, 0, 4 * 128)
    assert all(r.completion_tokens == 128 for r in result.requests)
    # warm-ups are not measured
    assert len(result.requests) == 4
    sd = result.spec_decode
    assert sd.metrics_available and sd.acceptance_length is not None
    assert sd.per_position is not None and len(sd.per_position) == 8
    # position rates fall with the position (cumulative), and the per-request AL agrees with the
    # server-wide counters (at concurrency 1 they count the same steps, give or take the cut last)
    assert list(sd.per_position) == sorted(sd.per_position, reverse=True)
    assert sd.client_al_mean == pytest.approx(sd.acceptance_length, rel=0.1)
    assert s_.ttft_ms.mean is not None and s_.e2el_ms.p99 is not None
    assert not result.errors.engine_dead and result.errors.failed == 0


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(BenchError, match=r"cannot use http://127\.0\.0\.1:9"):
        bench("http://127.0.0.1:9", BenchConfig(num_prompts=1, warmups=0))


def test_record_then_replay_gives_the_same_report(tmp_path, capsys) -> None:
    rec, live, replayed = tmp_path / "run.ndjson", tmp_path / "live.json", tmp_path / "again.json"
    with sim(n_spec=8, speed=50.0) as s:
        code = main(["bench", "--attach", s.url, "--input-len", "32", "--output-len", "64",
                     "--num-prompts", "3", "--warmups", "1", "--gpu", "none", "--ignore-eos",
                     "--record", str(rec), "--json", str(live)])  # fmt: skip
    assert code == 0
    assert main(["bench", "--replay", str(rec), "--json", str(replayed)]) == 0
    a, b = load_result(live), load_result(replayed)
    assert a.summary == b.summary
    assert a.spec_decode == b.spec_decode
    assert a.requests == b.requests
    out = capsys.readouterr().out
    assert "specmon bench" in out and "SIMULATED" in out


def test_soak_survives_errors_and_counts_them() -> None:
    # every 5th request is dropped mid-stream, every 5th (offset) answered 503
    schedule = "cycle:3f,1f+drop-after=10,1f+error=503"
    config = BenchConfig(input_len=16, output_len=32, warmups=0, duration_s=1.5, ignore_eos=True)
    with sim(n_spec=4, speed=50.0, schedule=schedule) as s:
        _, result = bench(s.url, config)
    e = result.errors
    assert not e.engine_dead
    assert result.summary.completed >= 6
    assert e.failed >= 2
    assert any("503" in m for m in e.by_message)
    assert any("ended before the response finished" in m or "rror" in m for m in e.by_message)
    # failed requests are counted, never part of the latency statistics
    assert result.summary.e2el_ms.n == result.summary.completed


def test_an_engine_that_dies_is_reported(tmp_path, capsys) -> None:
    """Seed 002: the engine serves ~10 requests, then every request fails."""
    sched = tmp_path / "dies.json"
    sched.write_text(json.dumps({"mode": "hold", "requests": ["f"] * 10 + ["f error=500"]}))
    out = tmp_path / "r.json"
    with sim(n_spec=4, speed=50.0, schedule=f"file:{sched}") as s:
        code = main(["bench", "--attach", s.url, "--input-len", "16", "--output-len", "32",
                     "--warmups", "0", "--duration", "60", "--max-consecutive-errors", "3",
                     "--gpu", "none", "--json", str(out)])  # fmt: skip
    assert code == 1
    result = load_result(out)
    e = result.errors
    assert e.engine_dead and e.engine_dead_after == 10
    assert "3 requests failed in a row" in (e.engine_dead_reason or "")
    assert "HTTP 500" in (e.engine_dead_reason or "")
    assert result.summary.completed == 10
    assert "ENGINE DEAD" in capsys.readouterr().out


@pytest.mark.slow
def test_the_cycle_the_schedule_sets_is_reported() -> None:
    """`cycle:5f,1t,3d,1r` at n=8 (the test's schedule, seed 000's shape): the period and the
    phase counts it sets, the phase each request reads as, the slow phase's requests flagged
    vanilla with acceptance near zero, and the report's fast-phase and long-run means as the
    plain means of the fast requests' and of every request's measured speed. Whatever the load,
    the report is the cycle rule on the measured speeds; the schedule's exact cycle is asserted
    when the machine stalled no request (a loaded machine can stall enough to hide it)."""
    # 5x (about 1,100 tok/s fast, 330 chunks a second): the client keeps up with every chunk
    # with two busy loops on the machine's two cores; at 20x it fell behind and the speeds it
    # read no longer showed the phases.
    speed = 5.0
    profile = PROFILES["gemma4-26b-rtx5090m"]
    config = BenchConfig(input_len=256, output_len=256, num_prompts=30, warmups=0, ignore_eos=True)
    cycle = "cycle:5f,1t,3d,1r"
    with sim(profile=profile.name, n_spec=8, speed=speed, schedule=cycle, seed=1) as s:
        # Scraped only before and after: the in-process simulator renders /metrics on its own loop
        # and, on a loaded 2-core machine, a scrape could stall a stream enough to turn one fast
        # request into a "transition" (seen: 131 tok/s among 200s).
        _, result = bench(s.url, config, scrape_interval=60.0)
    c = result.cycle
    # Whatever the machine made of the speeds, the report is the cycle rule on them (the rule of
    # live and replay); a loop or garbled answer would set no level.
    measured = [r.output_tok_s if r.quality is None else None for r in result.requests]
    rule = detect_cycle(measured)
    assert (c is None) == (rule is None)
    if c is not None and rule is not None:
        assert (c.period, c.cycles, c.score) == (rule.period, rule.cycles, rule.score)
    # The schedule's phase of each request (one at a time, in order), the acceptance it sets
    # (drawn at random per step, so a fast request can read 20% below the phase's mean speed),
    # and the class the detector gives it (a recovery is a fast answer after a slow one).
    schedule = "ffffftdddr"
    phase_of = {r.request_id: schedule[r.index % len(schedule)] for r in result.requests}
    al = {p: [r.client_al for r in result.requests if phase_of[r.request_id] == p] for p in "ftdr"}
    assert all(a == 1.0 for a in al["d"]), al["d"]
    assert max(al["t"]) < min(al["f"] + al["r"]), al
    # The machine's share: every step of the simulator takes the same time whatever it accepts,
    # so a request's steps per second (its speed over its acceptance length) is the same for all
    # but those the machine stalled (the first, which pays the client's start, is often one; a
    # whole test suite beside this one once made a fast request read 30% slow). A stalled
    # request is not held to its phase; the counts per cycle hold when none was stalled.
    steps_per_s = {
        r.request_id: r.output_tok_s / r.client_al
        for r in result.requests
        if r.output_tok_s is not None and r.client_al
    }
    typical = statistics.median(steps_per_s.values())
    stalled = [r for r in result.requests if steps_per_s.get(r.request_id, 0.0) < 0.85 * typical]
    if not stalled:  # every request kept its speed: the schedule's cycle, exactly
        assert c is not None
        assert c.period == 10 and c.cycles == 3
        assert (c.fast_per_cycle, c.transitions_per_cycle) == (5, 1)
        assert (c.degraded_per_cycle, c.recoveries_per_cycle) == (3, 1)
    degraded = [r for r in result.requests if phase_of[r.request_id] == "d"]
    assert len(degraded) == 9 and all(r.vanilla for r in degraded)
    assert all("acceptance_near_zero" in dict(r.vanilla_reasons) for r in degraded)
    if c is None:  # the machine stalled enough requests to hide the cycle (seen beside two
        return  # hogs and three busy workers): nothing below was reported
    expected = {"f": "fast", "t": "transition", "d": "degraded", "r": "fast"}
    for r in result.requests:
        if r not in stalled:
            assert r.phase == expected[phase_of[r.request_id]], (r.index, r.phase)
    # The means are folds of the speeds measured, whatever the machine made them: the fast-phase
    # mean is the plain mean of the requests read as fast (the recoveries, fast after a slow
    # one, left out), the long-run mean the plain mean of every request (a harmonic mean, or one
    # without the slow phases, would differ). How near the measured speeds come to the step
    # model's is measured by benchmarks/bench_cycle_speeds.py (docs/benchmarks.md).
    requests = result.requests
    fast = [
        r.output_tok_s
        for i, r in enumerate(requests)
        if r.phase == "fast" and (i == 0 or requests[i - 1].phase == "fast")
    ]
    every = [r.output_tok_s for r in requests]
    assert c.fast_mean_tok_s == pytest.approx(statistics.fmean(fast), rel=1e-9)
    assert c.long_run_mean_tok_s == pytest.approx(statistics.fmean(every), rel=1e-9)


def test_ctrl_c_keeps_what_was_measured() -> None:
    """Cancelling the run (what asyncio.run does on Ctrl-C) ends the measured phase: the finished
    requests are reported, one in flight is cancelled (not a failure), the run is marked."""
    config = BenchConfig(input_len=16, output_len=64, num_prompts=500, warmups=0, ignore_eos=True)

    class Watch(NoProgress):
        def __init__(self) -> None:
            self.done = 0
            self.enough = asyncio.Event()

        def request_done(self, ended, tokens_per_s) -> None:
            self.done += 1
            if self.done >= 3:
                self.enough.set()

    async def go(url: str):
        watch = Watch()
        task = asyncio.create_task(run_bench(endpoint_for(url), config, progress=watch))
        await watch.enough.wait()
        task.cancel()
        return await task

    with sim(n_spec=4, speed=5.0) as s:
        out = asyncio.run(go(s.url))
    assert out.interrupted
    result = analyze(out.events, server=out.server, config=config)
    assert result.errors.interrupted
    assert result.summary.completed >= 3 and result.summary.failed == 0
    assert result.errors.cancelled <= 1  # the one in flight, if any (concurrency 1)
    assert len(result.requests) == result.summary.completed + result.errors.cancelled


def test_gpu_readings_during_the_run() -> None:
    """GPU temperature, power and SM clock min/mean/max over the measured phase (a fake NVML
    whose GPU warms up by 4 °C per finished request)."""
    gpu = FakeGpu(name="NVIDIA Fake H100", temperature_c=60, power_mw=300_000, sm_clock_mhz=1980)

    class Heat(NoProgress):
        def request_done(self, ended, tokens_per_s) -> None:
            gpu.temperature_c += 4
            gpu.power_mw += 10_000

    config = BenchConfig(input_len=16, output_len=256, num_prompts=4, warmups=0, ignore_eos=True)
    sampler = NvmlSampler(nvml=FakeNvml([gpu]))
    with sim(n_spec=4, speed=10.0) as s:
        out = asyncio.run(
            run_bench(endpoint_for(s.url), config, gpu=sampler, progress=Heat(), gpu_interval=0.02)
        )
    result = analyze(out.events, server=out.server, config=config)
    assert result.server.gpu == "NVIDIA Fake H100"
    (g,) = result.gpu
    assert g.samples >= 4
    assert 60 <= g.temperature_c.min < g.temperature_c.max <= 76
    assert g.temperature_c.min <= g.temperature_c.mean <= g.temperature_c.max
    assert 300 <= g.power_w.min < g.power_w.max <= 340
    assert g.sm_clock_mhz.min == g.sm_clock_mhz.max == 1980


def test_dataset_file_prompts_and_output_lengths(tmp_path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        '{"prompt": "Write a Space Invaders game in HTML.", "output_len": 40}\n'
        '"Explain speculative decoding."\n'
    )
    config = BenchConfig(
        output_len=24, num_prompts=4, warmups=0, ignore_eos=True, dataset=str(data)
    )
    with sim(n_spec=4, speed=50.0) as s:
        _, result = bench(s.url, config)
    # file order, cycled; output_len from the line, else --output-len
    assert [r.completion_tokens for r in result.requests] == [40, 24, 40, 24]


def test_a_recorded_baseline_judges_the_replay_as_it_judged_the_bench(tmp_path, capsys) -> None:
    """`bench --baseline X --record F` then `replay F --json` (no --baseline): the replay judges
    the answers against X, read from the recording's header, so the same answers are flagged
    vanilla-speed; `bench --replay F` too; a --baseline given to the replay wins."""
    rec, live = tmp_path / "run.ndjson", tmp_path / "live.json"
    with sim(n_spec=8, speed=50.0) as s:
        code = main(["bench", "--attach", s.url, "--input-len", "32", "--output-len", "64",
                     "--num-prompts", "3", "--warmups", "0", "--gpu", "none", "--ignore-eos",
                     "--baseline", "1000000", "--record", str(rec),
                     "--json", str(live)])  # fmt: skip
    assert code == 0
    flagged_live = {r.request_id for r in load_result(live).requests if r.vanilla}
    assert flagged_live  # a baseline far above any speed: the answers are at vanilla speed
    header = json.loads(rec.read_text().splitlines()[0])
    assert (header["baseline_tok_s"], header["baseline_from"]) == (1e6, "given")
    capsys.readouterr()

    assert main(["replay", str(rec), "--json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert snap["session"]["baseline_tok_s"] == 1e6
    assert snap["session"]["baseline_from"] == "recording"
    replayed = {
        r["request_id"] for r in snap["requests"]["rows"] if r["verdict"]["kind"] == "vanilla-speed"
    }
    assert replayed == flagged_live

    again = tmp_path / "again.json"
    assert main(["bench", "--replay", str(rec), "--json", str(again)]) == 0
    assert {r.request_id for r in load_result(again).requests if r.vanilla} == flagged_live

    capsys.readouterr()
    assert main(["replay", str(rec), "--json", "--baseline", "0.001"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert (snap["session"]["baseline_tok_s"], snap["session"]["baseline_from"]) == (
        0.001,
        "given",
    )
    assert not [r for r in snap["requests"]["rows"] if r["verdict"]["kind"] == "vanilla-speed"]
