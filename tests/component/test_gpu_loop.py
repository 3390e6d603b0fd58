"""The 1 Hz sampling loop: grid timing on an injected clock, awaitable emit, close on cancel."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tests.support.fake_nvml import FakeNvml

from specmon.core.clock import FakeClock
from specmon.core.events import GpuSampled
from specmon.sources.gpu import NvmlSampler, run_sampler


class Stop(Exception):
    """Raised by the test's emit to end the loop after enough samples."""


class SlowSampler:
    """A sampler whose reading takes `cost` seconds of the fake clock; records its thread."""

    source = "gpu"

    def __init__(self, clock: FakeClock, costs: list[float]) -> None:
        self.clock = clock
        self.costs = costs
        self.closed = 0
        self.threads: set[int] = set()

    def sample(self, now: float) -> GpuSampled:
        self.threads.add(threading.get_ident())
        self.clock.advance(self.costs.pop(0) if self.costs else 0.0)
        return GpuSampled(t=now, source=self.source, gpus=())

    def close(self) -> None:
        self.closed += 1


def fake_sleep(clock: FakeClock, slept: list[float]):
    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    return sleep


async def test_samples_keep_to_the_grid_and_skip_missed_ticks():
    clock = FakeClock(100.0)
    # the third reading overruns two whole intervals
    sampler = SlowSampler(clock, [0.25, 0.0, 2.5, 0.1])
    seen: list[float] = []
    slept: list[float] = []

    def emit(event: GpuSampled) -> None:
        seen.append(event.t)
        if len(seen) == 4:
            raise Stop

    with pytest.raises(Stop):
        await run_sampler(sampler, emit, clock, 1.0, sleep=fake_sleep(clock, slept))
    assert seen == [100.0, 101.0, 102.0, 105.0]
    assert slept == [0.75, 1.0, 0.5]
    assert sampler.closed == 1


async def test_sampling_runs_off_the_event_loop_thread():
    clock = FakeClock()
    sampler = SlowSampler(clock, [])
    events: list[GpuSampled] = []

    def emit(event: GpuSampled) -> None:
        events.append(event)
        if len(events) == 2:
            raise Stop

    with pytest.raises(Stop):
        await run_sampler(sampler, emit, clock, 1.0, sleep=fake_sleep(clock, []))
    assert threading.get_ident() not in sampler.threads


async def test_a_coroutine_emit_is_awaited():
    clock = FakeClock()
    received: list[float] = []

    async def emit(event: GpuSampled) -> None:
        await asyncio.sleep(0)
        received.append(event.t)
        if len(received) == 3:
            raise Stop

    with pytest.raises(Stop):
        await run_sampler(SlowSampler(clock, []), emit, clock, 0.5, sleep=fake_sleep(clock, []))
    assert received == [0.0, 0.5, 1.0]


async def test_cancelling_the_nvml_loop_shuts_nvml_down():
    fake = FakeNvml()
    sampler = NvmlSampler(nvml=fake)
    first = asyncio.Event()
    events: list[GpuSampled] = []

    def emit(event: GpuSampled) -> None:
        events.append(event)
        first.set()

    never = asyncio.Event()

    async def sleep_forever(_: float) -> None:
        await never.wait()

    task = asyncio.create_task(run_sampler(sampler, emit, FakeClock(), 1.0, sleep=sleep_forever))
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events[0].gpus[0].name == "NVIDIA Fake H100"
    assert fake.initialised == 0
    assert fake.calls["nvmlShutdown"] == 1


@pytest.mark.parametrize("interval", [0.0, -1.0])
async def test_a_non_positive_interval_is_refused(interval):
    with pytest.raises(ValueError, match="positive"):
        await run_sampler(SlowSampler(FakeClock(), []), lambda e: None, FakeClock(), interval)
