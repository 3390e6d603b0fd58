"""What a server view says of a target read through a Prometheus (core.fleet_state).

A `ServerView` whose `origin` is "prometheus" carries a `FleetTargetInfo`: which Prometheus,
which job and instance, the Prometheus's own health of the target, the rate window of the
PromQL, and the GPUs of the target's host from dcgm-exporter series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specmon.core.events import GpuReading

ServerOrigin = Literal["metrics", "prometheus"]
"""Where a server's numbers come from: its /metrics page scraped by specmon ("metrics"), or the
query API of a Prometheus that scrapes it ("prometheus")."""

PER_REQUEST_NOT_AVAILABLE = (
    "per-request acceptance is not available in this mode: a Prometheus has only the server's "
    "counters (attach to the server, or chat through specmon, for per-request numbers)"
)
"""What a fleet target's view says of per-request acceptance (the screens show it)."""


@dataclass(frozen=True, slots=True)
class FleetTargetInfo:
    """A target as its Prometheus knows it."""

    prometheus: str
    """The Prometheus's URL."""
    job: str
    instance: str
    health: str
    """The Prometheus's scrape health of the target: "up", "down" or "unknown"."""
    last_error: str
    """The Prometheus's last scrape error (untrusted text: display literally)."""
    rate_window_s: float
    """The window of the PromQL `rate()` behind the window numbers."""
    last_read_t: float | None
    """When the Prometheus last answered for this target (session clock)."""
    gpus: tuple[GpuReading, ...] = ()
    """The target host's GPUs from dcgm-exporter series (empty when the Prometheus has none)."""
    history_step_s: float | None = None
    """The step of the range query behind the history (None: no range read yet)."""
