"""Types shared by the fleet tests and their fixtures."""

from __future__ import annotations

from collections.abc import Callable

from tests.fleet.prom import Prometheus

StartPrometheus = Callable[..., Prometheus]
"""The `start_prometheus` fixture: start a Prometheus on loopback scraping the given jobs."""
