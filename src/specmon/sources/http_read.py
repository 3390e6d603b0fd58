"""Bounded HTTP reads: one total deadline and a size cap for every GET that specmon's sources
make (the /metrics scraper, server identification, the Prometheus API, the dcgm-exporter page),
and for bench's POST to /tokenize.

httpx's `timeout` bounds each network operation (connect, each read), not the request: a server
that trickles one byte every half second never trips a 5 s read timeout and holds the reader for
as long as it likes. Here the whole request — connect, headers and body — runs under one deadline
(`asyncio.timeout`; the blocking variant checks the clock between blocks, so it ends within the
deadline plus one read timeout), and the body is read in blocks that stop at `max_bytes`.
Redirects are followed at most `MAX_REDIRECTS` times.

Failures raise `HttpReadError` (a one-line reason naming what was read: "timed out after 5 s
reading /metrics", "/metrics: redirect loop (more than 5 redirects)", "/metrics: answer larger
than the cap of N bytes; not read"), with the kinds `HttpDeadline`, `HttpTooLarge` and
`HttpStatus` (an answer whose status the caller did not accept); connection refusals
keep httpx's `ConnectError` so callers can tell "down" from "slow". Every failure is worded by
`sources.http_errors.describe_error` (never a repr: httpx's timeouts have an empty str()).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from specmon.sources.http_errors import MAX_REDIRECTS as MAX_REDIRECTS
from specmon.sources.http_errors import OneLineError, describe_error


class HttpReadError(OneLineError):
    """A read that did not give a whole answer in time; str() is a one-line reason."""


class HttpStatus(HttpReadError):
    """The server answered with a status the caller does not read (`status` holds it)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class HttpDeadline(HttpReadError):
    """The whole answer did not arrive within the deadline."""


class HttpTooLarge(HttpReadError):
    """The answer is larger than the cap (reading stopped there)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole answer: status, headers and body (at most the cap)."""

    status: int
    headers: httpx.Headers
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _too_large(what: str, max_bytes: int) -> HttpReadError:
    return HttpTooLarge(f"{what}: answer larger than the cap of {max_bytes} bytes; not read")


def _describe(exc: httpx.HTTPError, what: str, deadline_s: float) -> HttpReadError:
    text = describe_error(exc, what=what, deadline_s=deadline_s)
    if isinstance(exc, httpx.TimeoutException):
        return HttpDeadline(text)
    return HttpReadError(text)


async def read_answer(
    client: httpx.AsyncClient,
    url: str,
    *,
    what: str,
    deadline_s: float,
    max_bytes: int,
    params: Mapping[str, str] | None = None,
    accept: Callable[[int], bool] | None = None,
    method: str = "GET",
    json_body: Any = None,
) -> Answer:
    """GET `url` (or `method` it, with `json_body`) and read the whole answer within
    `deadline_s` seconds and `max_bytes` bytes.

    `what` names the read in messages ("/metrics", "/v1/models"). `accept(status)` False ends the
    read before the body with `HttpStatus`. Raises HttpReadError (HttpStatus one kind) or
    httpx.ConnectError (nothing listens there); never a bare timeout."""
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(method, url, params=params, json=json_body) as resp:
                if accept is not None and not accept(resp.status_code):
                    raise HttpStatus(f"{what}: HTTP {resp.status_code}", resp.status_code)
                parts: list[bytes] = []
                size = 0
                async for block in resp.aiter_bytes():
                    size += len(block)
                    if size > max_bytes:
                        raise _too_large(what, max_bytes)
                    parts.append(block)
                return Answer(resp.status_code, resp.headers, b"".join(parts))
    except TimeoutError:
        raise HttpDeadline(f"timed out after {deadline_s:g} s reading {what}") from None
    except httpx.ConnectError:
        raise
    except httpx.HTTPError as exc:
        raise _describe(exc, what, deadline_s) from None
    except httpx.InvalidURL as exc:
        raise HttpReadError(f"{what}: bad address ({exc})") from None


def read_answer_blocking(
    client: httpx.Client,
    url: str,
    *,
    what: str,
    deadline_s: float,
    max_bytes: int,
    accept: Callable[[int], bool] | None = None,
) -> Answer:
    """`read_answer` for a blocking client (a worker thread): the deadline is checked between
    blocks, so the read ends within `deadline_s` plus one read timeout of the client."""
    deadline = time.monotonic() + deadline_s
    try:
        with client.stream("GET", url) as resp:
            if accept is not None and not accept(resp.status_code):
                raise HttpStatus(f"{what}: HTTP {resp.status_code}", resp.status_code)
            body = bytearray()
            for block in resp.iter_bytes():
                body += block
                if len(body) > max_bytes:
                    raise _too_large(what, max_bytes)
                if time.monotonic() > deadline:
                    raise HttpDeadline(f"timed out after {deadline_s:g} s reading {what}")
            return Answer(resp.status_code, resp.headers, bytes(body))
    except httpx.ConnectError:
        raise
    except httpx.HTTPError as exc:
        raise _describe(exc, what, deadline_s) from None
    except httpx.InvalidURL as exc:
        raise HttpReadError(f"{what}: bad address ({exc})") from None
