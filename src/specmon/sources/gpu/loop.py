"""The sampling loop shared by the NVML and dcgm-exporter samplers.

Each sample runs in a worker thread (`asyncio.to_thread`), so a slow NVML call or a slow HTTP
answer never blocks the hub's event loop. Ticks keep to a fixed grid on the injected clock: a
sample that takes 0.3 s is followed by a 0.7 s wait, and a sample that overruns skips the ticks it
missed rather than firing a burst.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

from specmon.core.clock import Clock
from specmon.core.events import GpuEmit as Emit
from specmon.core.events import GpuSampled

Sleep = Callable[[float], Awaitable[None]]


class GpuSampler(Protocol):
    """What the loop needs of a sampler."""

    source: str

    def sample(self, now: float) -> GpuSampled:
        """Read now; never raises."""
        ...

    def close(self) -> None:
        """Release what the sampler holds (NVML, an HTTP client)."""
        ...


def _sample_at_now(sampler: GpuSampler, clock: Clock) -> GpuSampled:
    # The clock is read in the worker thread right before the reading starts.
    return sampler.sample(clock())


async def run_sampler(
    sampler: GpuSampler,
    emit: Emit,
    clock: Clock,
    interval: float = 1.0,
    *,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Sample every `interval` seconds of `clock` and emit each sample, until cancelled.

    `sleep` is injectable so tests drive the loop with a FakeClock. The sampler is closed when
    the loop ends, whether by cancellation or by an error raised from `emit`.
    """
    if not interval > 0:
        raise ValueError(f"the GPU sampling interval must be positive, not {interval}")
    try:
        due = clock()
        while True:
            event = await asyncio.to_thread(_sample_at_now, sampler, clock)
            result = emit(event)
            if inspect.isawaitable(result):
                await result
            due += interval
            now = clock()
            if due <= now:  # overran: skip the missed ticks
                due += math.floor((now - due) / interval + 1) * interval
            await sleep(due - now)
    finally:
        sampler.close()
