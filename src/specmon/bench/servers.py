"""Where a bench or sweep point gets its server: the "server provider" seam.

A provider turns a point (n_spec and serve settings such as max_num_batched_tokens) into a
running server for the time of a `with` block:
- `AttachProvider`: the user started every server and gives one URL per n_spec;
- `StartingProvider`: host mode. Its start function (the cli builds it from the host-mode flags)
  starts `vllm serve` for the point, waits for `/health`, yields the endpoint and stops the whole
  process group on exit (Ctrl-C included); a server that fails to start raises
  `ServerUnavailable` with the cause, and the sweep records the point as failed and goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
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


ServeSettings = tuple[tuple[str, str], ...]
"""Serve-parameter values of a grid point: ((name, value), ...), names in `vllm serve`'s
underscore form (max_num_batched_tokens), in the order the grid was given."""


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "." else "_" for ch in text)


@dataclass(frozen=True, slots=True)
class Point:
    """One sweep point's server settings: n_spec and the serve-grid values."""

    n_spec: int
    serve: ServeSettings = ()

    @property
    def key(self) -> str:
        """File-name safe and unique: `n8`, `n8_max_num_batched_tokens-4096`."""
        return f"n{self.n_spec}" + "".join(f"_{_slug(k)}-{_slug(v)}" for k, v in self.serve)

    @property
    def label(self) -> str:
        """For people: `n_spec=8`, `n_spec=8 max_num_batched_tokens=4096`."""
        return " ".join([f"n_spec={self.n_spec}", *(f"{k}={v}" for k, v in self.serve)])

    def serve_args(self) -> list[str]:
        """The grid values as `vllm serve` arguments (`--max-num-batched-tokens 4096`)."""
        out: list[str] = []
        for name, value in self.serve:
            out += [f"--{name.replace('_', '-')}", value]
        return out


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
        if endpoint is None or point.serve:
            raise ServerUnavailable(f"no server given for {point.label}")
        return self._attached(endpoint)


class StartingProvider:
    """Host mode: `start(point)` is a context manager that starts the point's server, waits until
    it is ready and stops it (its whole process group) on exit; it raises ServerUnavailable with
    the cause when the server does not start. One server at a time: the sweep enters one point's
    block after the previous one's has stopped its server."""

    def __init__(
        self,
        points: Sequence[Point],
        start: Callable[[Point], contextlib.AbstractContextManager[Endpoint]],
    ) -> None:
        self._points = list(points)
        self._start = start

    def points(self) -> Sequence[Point]:
        return list(self._points)

    def acquire(self, point: Point) -> contextlib.AbstractContextManager[Endpoint]:
        return self._start(point)


def parse_points(
    point_args: Sequence[str], n_spec_arg: str | None, attach_args: Sequence[str]
) -> dict[int, str]:
    """{n_spec: URL} from `--point N=URL` items, or from `--n-spec 0,8` paired in order with
    `--attach URL` (one per value). ValueError with a one-line message when they do not fit."""
    from specmon.bench.config import ConfigError, parse_int_list
    from specmon.bench.limits import MAX_N_SPEC

    out: dict[int, str] = {}
    for item in point_args:
        n_text, sep, url = item.partition("=")
        if not sep or not url.strip():
            raise ConfigError(f"--point must be N=URL (e.g. 8=http://127.0.0.1:8000), got {item!r}")
        try:
            n = int(n_text.strip())
        except ValueError:
            raise ConfigError(
                f"--point N must be an integer from 0 to {MAX_N_SPEC}, got {n_text!r}"
            ) from None
        if not 0 <= n <= MAX_N_SPEC:
            raise ConfigError(f"--point N must be an integer from 0 to {MAX_N_SPEC}, got {n}")
        if n in out:
            raise ConfigError(f"--point gives n_spec={n} twice")
        out[n] = url.strip()
    if n_spec_arg is not None:
        values = parse_int_list("--n-spec", n_spec_arg, 0, MAX_N_SPEC)
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
            "--attach URL per value, or host mode: --model M (or --preset NAME) --n-spec 0,8"
        )
    for n, url in out.items():
        try:
            server_base(url)
        except ValueError as exc:
            raise ConfigError(f"n_spec={n}: {exc}") from None
    return dict(sorted(out.items()))
