"""Running the fleet source (sources.prometheus_fleet) on a monitor's hub.

`FleetSpec` is what the command line says of the Prometheus (picklable: it travels to a
collector process in `SessionConfig.extra["prometheus"]`); `start_fleet` creates the source on
the monitor's clock, registers its closer and, unless `run_loops` is off, runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.runtime.monitor import Monitor
from specmon.sources.prometheus_fleet import DEFAULT_RATE_WINDOW_S, PrometheusFleet

EXTRA_KEY = "prometheus"


@dataclass(frozen=True, slots=True)
class FleetSpec:
    url: str
    match: str | None = None
    interval: float = 5.0
    rate_window_s: float = DEFAULT_RATE_WINDOW_S


def make_fleet(monitor: Monitor, spec: FleetSpec) -> PrometheusFleet:
    fleet = PrometheusFleet(
        spec.url,
        match=spec.match,
        clock=monitor.hub.clock,
        interval=spec.interval,
        rate_window_s=spec.rate_window_s,
    )
    monitor.hub.add_closer(fleet.aclose)
    return fleet


def start_fleet(monitor: Monitor, spec: FleetSpec, *, run_loops: bool = True) -> PrometheusFleet:
    """The fleet source for `spec` on the (started) monitor's hub; read in a loop unless
    `run_loops` is False (then the caller reads with `read_once`)."""
    fleet = make_fleet(monitor, spec)
    if run_loops:
        monitor.run_source(fleet.run)
    return fleet


def start_fleet_from_extra(monitor: Monitor, extra: dict[str, object]) -> PrometheusFleet | None:
    """Start the fleet source a session config asks for (None when it asks for none)."""
    spec = extra.get(EXTRA_KEY)
    return start_fleet(monitor, spec) if isinstance(spec, FleetSpec) else None
