"""Simulated servers for the sim tests, paced by a FakeClock so nothing waits in real time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from specmon.core.clock import FakeClock
from specmon.sim.server import RunningSim, SimConfig, start_in_thread


class FakePacing:
    """A fake clock and the sleeper that advances it (the server never really waits)."""

    def __init__(self) -> None:
        self.clock = FakeClock(1000.0)

    async def sleep(self, seconds: float) -> None:
        self.clock.advance(max(0.0, seconds))
        await asyncio.sleep(0)


@pytest.fixture
def start_sim() -> Iterator[Callable[..., RunningSim]]:
    """Start fake-paced simulators: `start_sim(profile=..., n_spec=..., schedule=...)`."""
    running: list[RunningSim] = []

    def start(log_sink: Callable[[str], None] | None = None, **fields: object) -> RunningSim:
        pacing = FakePacing()
        fields.setdefault("log_interval", 0.0)
        sim = start_in_thread(
            SimConfig(**fields),  # type: ignore[arg-type]
            clock=pacing.clock,
            sleep=pacing.sleep,
            log_sink=log_sink or (lambda line: None),
        )
        running.append(sim)
        return sim

    yield start
    for sim in running:
        sim.stop()
