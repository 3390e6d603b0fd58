"""Simulated vLLM servers in this process (specmon.sim, one thread each) for the bench and sweep
tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from specmon.sim.server import SimConfig, start_in_thread


@contextmanager
def sims(profile: str, points: tuple[int, ...], speed: float) -> Iterator[dict[int, str]]:
    """One simulator of `profile` per n_spec in `points` (seed 7, `--speed speed`): their URLs
    by n_spec, all stopped on exit."""
    with ExitStack() as stack:
        urls = {}
        for n in points:
            s = stack.enter_context(
                start_in_thread(
                    SimConfig(profile=profile, n_spec=n, speed=speed, seed=7),
                    log_sink=lambda _l: None,
                )
            )
            urls[n] = s.url
        yield urls
