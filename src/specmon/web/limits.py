"""`specmon web`'s connection limits: what a connection may cost before it shows the token.

Every user of the machine can connect to a loopback port, token or not (docs/web.md, "Other
users of the same machine"). Without limits, 1,100 idle connections took every file descriptor
of the server: the owner's page could no longer be opened, and asyncio wrote a traceback for
every failed accept() (65 MB of them in 40 s). So:

- **idle**: aiohttp's own `keepalive_timeout` (the plan's `idle_timeout_s`, server.py passes
  it). A connection that has not sent a complete request head for that long is closed: a new
  one (aiohttp counts from the connection's start since 3.14.4, hence that lower bound in
  pyproject.toml) or a kept-alive one between requests. A WebSocket is a request in progress,
  never idle.
- **caps**: at most `Caps.per_peer` connections from one address and `Caps.total` in all, well
  under the file-descriptor limit. A new connection over a cap closes the oldest connection that
  has not been let in (none of its requests passed the token check): that address's for its
  cap, anyone's for the total. So a flood of connections that never show the token cannot keep
  the owner out (on loopback every local user is the same address, 127.0.0.1): the owner's
  browser sends its request as soon as it connects, is let in, and is not closed for anyone.
  Only when every connection there has been let in is the new one refused.
- **log**: at most one line per kind of refusal per LOG_INTERVAL_S, saying how many there were,
  and no traceback, from these limits or from the event loop's exception handler (an accept()
  that fails for want of file descriptors is one line, not a traceback per retry).

Why a protocol factory and not a middleware: a middleware runs once a request head has arrived,
which an idle flood never sends; and aiohttp has no connection cap of its own (its sites hand
every accepted socket to a RequestHandler, which starts a task for it). The decision needs the
peer's address, known first in `connection_made`, so the listening socket is served by asyncio's
`create_server` with `ConnectionLimits.protocol_factory`: each connection is counted there and
then handed to aiohttp's RequestHandler, or closed before aiohttp sees it. The token check
(web/auth.py's middleware) tells `let_in` which connections are the owner's.

Imported only when serving (asyncio): `specmon --help` stays fast.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_CONNECTIONS = 256
"""The most connections open at once (fewer when the file-descriptor limit is low: at most a
FD_SHARE-th of it)."""
FD_SHARE = 4
"""The connections may take at most this share (1/4) of the soft file-descriptor limit: the rest
is for the app processes' pipes, the accept() bursts (up to BACKLOG sockets accepted at once,
before they are counted) and the server itself."""
MAX_PER_PEER = 32
"""The most connections from one address, at least: a browser opens about 6 to a server, plus
one WebSocket per tab (`per_peer_cap`)."""
BROWSER_CONNECTIONS = 16
"""Connections a browser may hold beside its tabs' WebSockets, with room to spare."""
BACKLOG = 128
"""The listening socket's backlog (also how many connections asyncio accepts in one go)."""
LOG_INTERVAL_S = 10.0
"""One log line per kind of refusal per this many seconds at most."""

logger = logging.getLogger("specmon.web")


@dataclass(frozen=True)
class Caps:
    per_peer: int
    """Connections from one address."""
    total: int
    """Connections in all."""


def per_peer_cap(max_tabs: int) -> int:
    return max(MAX_PER_PEER, max_tabs + BROWSER_CONNECTIONS)


def caps_for(max_tabs: int, nofile: int | None = None) -> Caps:
    """The caps for a server of `max_tabs` tabs whose soft file-descriptor limit is `nofile`
    (this process's when None)."""
    if nofile is None:
        nofile = soft_nofile()
    per_peer = per_peer_cap(max_tabs)
    total = MAX_CONNECTIONS if nofile is None else min(MAX_CONNECTIONS, nofile // FD_SHARE)
    return Caps(per_peer=per_peer, total=max(total, per_peer))


def soft_nofile() -> int | None:
    """This process's soft limit on open files; None when there is none (or no way to ask)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


class RateLog:
    """One line per kind per `interval` seconds at most; the next one says how many there were
    in between."""

    def __init__(
        self,
        emit: Callable[[str], None],
        interval: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit = emit
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def note(self, kind: str, text: str) -> None:
        now = self._clock()
        count = self._count.get(kind, 0) + 1
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._count[kind] = count
            return
        self._count[kind] = 0
        self._last[kind] = now
        if last is None:
            self._emit(f"{text} (said once per {self._interval:g} s at most)")
        else:
            self._emit(f"{text} ({count:,} times in the last {now - last:.0f} s)")


def one_line(text: str) -> str:
    return " ".join(text.split())


def loop_exception_handler(log: RateLog) -> Callable[[asyncio.AbstractEventLoop, Any], None]:
    """An event-loop exception handler: one line per kind of message (rate-limited), with the
    exception's own one-line text, never a traceback."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = one_line(str(context.get("message") or "error in the event loop"))
        exc = context.get("exception")
        text = message if exc is None else f"{message}: {one_line(str(exc)) or type(exc).__name__}"
        log.note(f"loop: {message}", text)

    return handle


class ConnectionLimits:
    """The connections open now, by address, and which were let in (see the module's text)."""

    def __init__(self, caps: Caps, log: RateLog) -> None:
        self.caps = caps
        self._log = log
        self._by_peer: dict[str, int] = {}
        self._waiting: dict[Gate, None] = {}
        """Connections not let in, oldest first (a dict keeps the order of insertion)."""
        self._waiting_by_peer: dict[str, dict[Gate, None]] = {}
        self._by_transport: dict[Any, Gate] = {}

    @property
    def total(self) -> int:
        return len(self._by_transport)

    def protocol_factory(self, make_handler: Callable[[], Any]) -> Callable[[], Gate]:
        """For `loop.create_server`: each connection counted, then given to `make_handler()`'s
        protocol (aiohttp's RequestHandler), or closed."""
        return lambda: Gate(self, make_handler)

    def admit(self, gate: Gate) -> bool:
        """Count `gate`'s connection in, closing the oldest one not let in when a cap is
        reached; False (not counted) when there is none to close."""
        peer = gate.peer
        if self._by_peer.get(peer, 0) >= self.caps.per_peer:
            victim = next(iter(self._waiting_by_peer.get(peer, {})), None)
            if victim is None:
                self._log.note(
                    "refused: address",
                    f"refused a connection from {peer}: it holds {self.caps.per_peer} "
                    "connections, all let in (the limit per address)",
                )
                return False
            self._close(victim)
            self._log.note(
                "closed: address",
                f"{peer} reached {self.caps.per_peer} connections (the limit per address): "
                "closed its oldest one not let in for a new one",
            )
        if self.total >= self.caps.total:
            victim = next(iter(self._waiting), None)
            if victim is None:
                self._log.note(
                    "refused: total",
                    f"refused a connection from {peer}: {self.caps.total} connections are "
                    "open, all let in (the limit)",
                )
                return False
            self._close(victim)
            self._log.note(
                "closed: total",
                f"{self.caps.total} connections are open (the limit): closed the oldest one "
                f"not let in (from {victim.peer}) for a new one from {peer}",
            )
        self._by_transport[gate.transport] = gate
        self._by_peer[peer] = self._by_peer.get(peer, 0) + 1
        self._waiting[gate] = None
        self._waiting_by_peer.setdefault(peer, {})[gate] = None
        return True

    def let_in(self, transport: Any) -> None:
        """A request on `transport`'s connection passed the token check: it is never closed to
        make room."""
        gate = self._by_transport.get(transport)
        if gate is not None:
            self._unwait(gate)

    def forget(self, gate: Gate) -> None:
        """`gate`'s connection is gone (once counted, it is uncounted once)."""
        if self._by_transport.pop(gate.transport, None) is None:
            return
        self._unwait(gate)
        left = self._by_peer.get(gate.peer, 0) - 1
        if left > 0:
            self._by_peer[gate.peer] = left
        else:
            self._by_peer.pop(gate.peer, None)

    def _unwait(self, gate: Gate) -> None:
        self._waiting.pop(gate, None)
        of_peer = self._waiting_by_peer.get(gate.peer)
        if of_peer is not None:
            of_peer.pop(gate, None)
            if not of_peer:
                del self._waiting_by_peer[gate.peer]

    def _close(self, gate: Gate) -> None:
        """Uncount `gate` now and drop its connection (abort: its file descriptor goes at once,
        whatever it has not read)."""
        self.forget(gate)
        gate.transport.abort()


class Gate(asyncio.Protocol):
    """One accepted connection: counted by `ConnectionLimits`, then everything passed to the
    protocol `make_handler()` gives (aiohttp's RequestHandler), or closed before it has one."""

    def __init__(self, limits: ConnectionLimits, make_handler: Callable[[], Any]) -> None:
        self.limits = limits
        self.make_handler = make_handler
        self.handler: Any = None
        self.transport: Any = None
        self.peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        name = transport.get_extra_info("peername")
        if isinstance(name, tuple) and name:
            self.peer = str(name[0])
        if not self.limits.admit(self):
            self.transport.abort()
            return
        self.handler = self.make_handler()
        self.handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.limits.forget(self)
        if self.handler is not None:
            self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.handler is not None:
            self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        if self.handler is None:
            return None
        keep_open = self.handler.eof_received()
        return None if keep_open is None else bool(keep_open)

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()
