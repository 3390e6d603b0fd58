"""Where a bench or sweep point gets its server: the "server provider" seam.

A provider turns a point (n_spec, and later other serve settings) into a running server for the
time of a `with` block. This phase has one provider, `AttachProvider`: the user started every
server and gives one URL per point. Host mode (specmon starting `vllm serve` itself, restarting it
per point and waiting for ready) will be another provider with the same interface: its
`acquire()` starts the server, waits for `/health`, yields the endpoint and stops the server on
exit (Ctrl-C included); nothing else in bench or sweep changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from specmon.sources.metrics_scraper import metrics_url_for
from specmon.sources.stream_client import server_base


class ServerUnavailable(RuntimeError):
    """The provider has no server for a point (str() says why); the sweep records the point as
    failed and goes on."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A running server: base URL and /metrics address."""

    base_url: str
    metrics_url: str
    description: str
    """How the server came to be ("attached: URL"; host mode: the command line)."""
    metrics_url_given: bool = False
    """True when the /metrics address is not the server's own (the API key is not sent there)."""


def endpoint_for(url: str, metrics_url: str | None = None) -> Endpoint:
    """An attached endpoint (ValueError with a clear message on a bad URL)."""
    base = server_base(url)
    metrics = metrics_url_for(base)
    if metrics_url:
        text = metrics_url.strip()
        server_base(text)  # validates
        metrics = text if "://" in text else "http://" + text
    return Endpoint(base, metrics, f"attached: {base}", metrics_url_given=bool(metrics_url))


@dataclass(frozen=True, slots=True)
class Point:
    """One sweep point's server settings."""

    n_spec: int

    @property
    def key(self) -> str:
        return f"n{self.n_spec}"


class ServerProvider(Protocol):
    """Gives the server of a point for the time of a `with` block."""

    def points(self) -> Sequence[Point]: ...

    def acquire(self, point: Point) -> contextlib.AbstractContextManager[Endpoint]:
        """Enter: the server is ready (host mode starts it); exit: it is released (host mode
        stops it). Raises ServerUnavailable when there is no server for the point."""
        ...


class AttachProvider:
    """One already running server per n_spec (the user started them)."""

    def __init__(
        self, urls: Mapping[int, str], metrics_urls: Mapping[int, str] | None = None
    ) -> None:
        self._endpoints = {
            n: endpoint_for(url, (metrics_urls or {}).get(n)) for n, url in urls.items()
        }

    def points(self) -> Sequence[Point]:
        return [Point(n) for n in self._endpoints]

    @contextlib.contextmanager
    def _attached(self, endpoint: Endpoint) -> Iterator[Endpoint]:
        yield endpoint

    def acquire(self, point: Point) -> contextlib.AbstractContextManager[Endpoint]:
        endpoint = self._endpoints.get(point.n_spec)
        if endpoint is None:
            raise ServerUnavailable(f"no server given for n_spec={point.n_spec}")
        return self._attached(endpoint)


def parse_points(
    point_args: Sequence[str], n_spec_arg: str | None, attach_args: Sequence[str]
) -> dict[int, str]:
    """{n_spec: URL} from `--point N=URL` items, or from `--n-spec 0,8` paired in order with
    `--attach URL` (one per value). ValueError with a one-line message when they do not fit."""
    from specmon.bench.config import ConfigError, parse_int_list

    out: dict[int, str] = {}
    for item in point_args:
        n_text, sep, url = item.partition("=")
        if not sep or not url.strip():
            raise ConfigError(f"--point must be N=URL (e.g. 8=http://127.0.0.1:8000), got {item!r}")
        try:
            n = int(n_text.strip())
        except ValueError:
            raise ConfigError(
                f"--point N must be an integer from 0 to 64, got {n_text!r}"
            ) from None
        if not 0 <= n <= 64:
            raise ConfigError(f"--point N must be an integer from 0 to 64, got {n}")
        if n in out:
            raise ConfigError(f"--point gives n_spec={n} twice")
        out[n] = url.strip()
    if n_spec_arg is not None:
        values = parse_int_list("--n-spec", n_spec_arg, 0, 64)
        if len(values) != len(attach_args):
            raise ConfigError(
                f"--n-spec lists {len(values)} value(s) but {len(attach_args)} --attach URL(s) "
                "were given: attach one running server per value, in the same order"
            )
        for n, url in zip(values, attach_args, strict=True):
            if n in out:
                raise ConfigError(f"n_spec={n} is given twice (--point and --n-spec)")
            out[n] = url
    elif attach_args:
        raise ConfigError("--attach needs --n-spec (one value per URL), or use --point N=URL")
    if not out:
        raise ConfigError(
            "no sweep points: give --point N=URL for each setting, or --n-spec 0,8 with one "
            "--attach URL per value (host mode, which starts the servers, is not built yet)"
        )
    for n, url in out.items():
        try:
            server_base(url)
        except ValueError as exc:
            raise ConfigError(f"n_spec={n}: {exc}") from None
    return dict(sorted(out.items()))
