"""One line for an HTTP or transport failure, without secrets: the one describer of sources/ and
bench/ (the stream client, the /metrics scraper, the Prometheus reader, bounded reads, bench's
prompt sizing).

The wording, by kind:
- a failure that already is one line (a stream format error, a bounded read's `HttpReadError`):
  its text;
- no byte for the stream's idle timeout: "no data from the server for N s";
- a whole read past its deadline: "timed out after N s reading WHAT";
- another timeout: "no answer from SOURCE within the timeout (ReadTimeout)";
- a redirect loop: "WHAT: redirect loop (more than 5 redirects)";
- no connection made (refused, no route, a bad certificate): "cannot connect to SOURCE:
  ConnectError: detail";
- the connection reset or cut: "connection to SOURCE failed: RemoteProtocolError: detail";
- anything else: "Name: detail" ("WHAT: Name: detail" when a read is named).

Never empty, never a repr (httpx's timeouts have an empty str()), on one line, with every secret
given replaced by the redaction marker. aiohttp's errors are told by name, so this module does
not import aiohttp (the collector imports it on its first chat only).
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx

from specmon.core.redaction import redact_text
from specmon.core.sse import StreamFormatError
from specmon.core.stream_limits import idle_message

MAX_REDIRECTS = 5
"""Redirects followed before a read gives up ("redirect loop")."""

_AIOHTTP_READ_TIMEOUT = frozenset({"SocketTimeoutError"})
_AIOHTTP_CONNECT = frozenset({"ClientConnectorError"})
_AIOHTTP_TRANSPORT = frozenset({"ClientConnectionError", "ClientPayloadError"})


class OneLineError(Exception):
    """A failure whose str() already is its one-line description (bounded reads' errors)."""


def describe_error(
    exc: BaseException,
    *,
    source: str | None = None,
    what: str | None = None,
    deadline_s: float | None = None,
    idle_timeout_s: float | None = None,
    secrets: Iterable[str] = (),
) -> str:
    """`exc` in one line (see the module docstring). `source`: the server's address (without
    credentials); `what`: the read that failed (a path, "/metrics"); `deadline_s`: the whole
    read's deadline; `idle_timeout_s`: a stream's idle timeout; `secrets`: values scrubbed.
    WHAT stands for `what`, else `source`; SOURCE for `source`, else `what`."""
    name = type(exc).__name__
    detail = " ".join(str(exc).split())
    read = what or source or "the server"
    host = source or what or "the server"
    if isinstance(exc, StreamFormatError | OneLineError):
        text = detail or name
    elif idle_timeout_s is not None and _is_read_timeout(exc):
        text = idle_message(idle_timeout_s)
    elif isinstance(exc, httpx.TimeoutException | TimeoutError):  # aiohttp's are TimeoutErrors
        if deadline_s is not None:
            text = f"timed out after {deadline_s:g} s reading {read}"
        else:
            text = f"no answer from {host} within the timeout ({name})"
    elif isinstance(exc, httpx.TooManyRedirects):
        text = f"{read}: redirect loop (more than {MAX_REDIRECTS} redirects)"
    elif isinstance(exc, httpx.ConnectError) or _is_aiohttp(exc, _AIOHTTP_CONNECT):
        text = f"cannot connect to {host}: {name}" + (f": {detail}" if detail else "")
    elif isinstance(exc, httpx.TransportError) or _is_aiohttp(exc, _AIOHTTP_TRANSPORT):
        text = f"connection to {host} failed: {name}" + (f": {detail}" if detail else "")
    elif what is not None:
        text = f"{what}: {name}" + (f": {detail}" if detail else "")
    else:
        text = f"{name}: {detail}" if detail else name
    return redact_text(text, tuple(s for s in secrets if s))


def _is_read_timeout(exc: BaseException) -> bool:
    return isinstance(exc, httpx.ReadTimeout) or _is_aiohttp(exc, _AIOHTTP_READ_TIMEOUT)


def _is_aiohttp(exc: BaseException, names: frozenset[str]) -> bool:
    """Whether `exc` is an instance of one of aiohttp's exception classes `names`."""
    return any(
        c.__name__ in names and c.__module__.startswith("aiohttp") for c in type(exc).__mro__
    )
