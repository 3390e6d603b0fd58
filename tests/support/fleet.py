"""Types and helpers shared by the fleet tests and their fixtures: reading a PrometheusFleet
from synchronous test code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.support.prometheus import Prometheus

from specmon.core.events import FleetSampled
from specmon.core.session_state import SessionState
from specmon.core.views import ServerView, SessionView
from specmon.sources.prometheus_fleet import PrometheusFleet

StartPrometheus = Callable[..., Prometheus]
"""The `start_prometheus` fixture: start a Prometheus on loopback scraping the given jobs."""

_LOOP = asyncio.new_event_loop()
"""One loop for every read: a fleet's HTTP connections belong to the loop that opened them."""


def read(fleet: PrometheusFleet, state: SessionState) -> FleetSampled:
    """One read of the fleet, its events applied to `state`."""
    return _LOOP.run_until_complete(fleet.read_once(state.apply))


def fleet_for(url: str, **kwargs: object) -> PrometheusFleet:
    """A fleet on the Prometheus at `url`: a 120 s rate window and 60 s of history at 1 s steps
    unless `kwargs` say otherwise."""
    kwargs.setdefault("rate_window_s", 120.0)
    kwargs.setdefault("history_s", 60.0)
    kwargs.setdefault("history_step_s", 1.0)
    return PrometheusFleet(url, **kwargs)  # type: ignore[arg-type]


def by_source(view: SessionView) -> dict[str, ServerView]:
    """The view's servers by their source URL."""
    return {s.source: s for s in view.servers}
