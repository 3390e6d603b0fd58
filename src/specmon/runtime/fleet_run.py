"""Running the fleet source (sources.prometheus_fleet) on a monitor's hub.

`FleetSpec` is what the command line says of the Prometheus (picklable: it travels to a
collector process in `SessionConfig.fleet`); `start_fleet` creates the source on
the monitor's clock, registers its closer and, unless `run_loops` is off, runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specmon.runtime.monitor import Monitor
from specmon.sources.prometheus_fleet import DEFAULT_RATE_WINDOW_S, PrometheusFleet

MAX_TOKEN_FILE_BYTES = 64 * 1024
"""A --bearer-token-file longer than this is refused (it is not a token)."""


class BearerTokenFileError(ValueError):
    """A --bearer-token-file that cannot be used (the message is one line, without the token)."""


def read_bearer_token_file(path: str) -> str:
    """The token in `path` (surrounding whitespace removed, as Prometheus does), read at start:
    the token is never in argv, a recording or a log, only in the file and this process."""
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_TOKEN_FILE_BYTES:
            raise BearerTokenFileError(f"--bearer-token-file {path}: too long to be a token")
        token = file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BearerTokenFileError(
            f"--bearer-token-file {path}: cannot read it ({exc.strerror or exc})"
        ) from None
    except UnicodeDecodeError:
        raise BearerTokenFileError(f"--bearer-token-file {path}: not UTF-8 text") from None
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        raise BearerTokenFileError(
            f"--bearer-token-file {path}: must hold one token (printable, no spaces)"
        )
    return token


@dataclass(frozen=True, slots=True)
class FleetSpec:
    url: str
    match: str | None = None
    interval: float = 5.0
    rate_window_s: float = DEFAULT_RATE_WINDOW_S
    bearer_token_file: str | None = None
    """Sent as `Authorization: Bearer` to the Prometheus (its origin only: the client follows no
    redirect). The path travels, not the token: it is read where the source runs."""


def make_fleet(monitor: Monitor, spec: FleetSpec) -> PrometheusFleet:
    headers: dict[str, str] = {}
    if spec.bearer_token_file is not None:
        headers["Authorization"] = f"Bearer {read_bearer_token_file(spec.bearer_token_file)}"
    fleet = PrometheusFleet(
        spec.url,
        match=spec.match,
        headers=headers,
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
