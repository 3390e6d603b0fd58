"""Fixtures for component tests: a simulated server on a free loopback port, and a canned SSE
server for response shapes the simulator does not produce (reasoning, per-request spec metrics)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.canned_server import CannedServer

from specmon.sim.server import SimConfig, start_in_thread


@pytest.fixture
def sim() -> Iterator:
    """A fast simulated server (n_spec 8), its logs discarded."""
    with start_in_thread(SimConfig(speed=50.0, n_spec=8, seed=1), log_sink=lambda _l: None) as s:
        yield s


@pytest.fixture
def canned():
    servers: list[CannedServer] = []

    def start(chunks: list[dict], **kwargs) -> CannedServer:
        server = CannedServer(chunks, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
