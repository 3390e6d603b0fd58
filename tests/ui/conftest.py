"""Fixtures of the Textual app tests (fakes and Pilot helpers: tests/support/ui_fakes.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.ui_fakes import Status401Server, sim_port

from specmon.sim.server import SimConfig
from specmon.ui.live_port import LivePort


@pytest.fixture
def fast_sim_port() -> Iterator[tuple[LivePort, str]]:
    """A real port on a simulator paced 50x faster than the profile."""
    with sim_port(SimConfig(speed=50.0, seed=1)) as pair:
        yield pair


@pytest.fixture
def server_401() -> Iterator[Status401Server]:
    server = Status401Server()
    yield server
    server.stop()
