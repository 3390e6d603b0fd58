"""`specmon web` against other users of the same machine: a flood of idle connections from the
same address as the owner (loopback is everyone's) and from many addresses neither takes the
server's file descriptors nor keeps the owner out, and is said in a few lines, not tracebacks;
idle connections are closed after the idle timeout, a page's WebSocket is not. The limits'
logic itself (caps by address and in all, who is closed to make room, the rate-limited log) is
checked without a server below."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import warnings
from collections.abc import Iterator

import aiohttp
import pytest
from tests.support.waiting import wait_for
from tests.support.web_pages import open_page, read_screen_until
from tests.support.web_serving import WAIT_LIMIT_S, run_web, start_web

from specmon.web.limits import (
    MAX_CONNECTIONS,
    Caps,
    ConnectionLimits,
    RateLog,
    caps_for,
    loop_exception_handler,
)
from specmon.web.plan import IDLE_TIMEOUT_ENV, MAX_IDLE_TIMEOUT_S

FLOOD = 1100
"""Idle connections the flood opens (the issue's count: above a soft limit of 1024 files)."""
SERVER_NOFILE = 1024
"""The server's soft limit on open files in the flood test (a usual default)."""
SPARE_FILES = 128
"""Files this test process needs beside the flood's sockets."""
MAX_OUTPUT_BYTES = 64 * 1024
"""What the server may write during the flood, at most (it wrote 65 MB of tracebacks in 40 s)."""
OTHER_ADDRESSES = 40
"""Loopback addresses (127.0.0.2 on) that half the flood comes from, under the cap per address
each: together they reach the cap on all connections."""


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed `sock`'s connection (EOF or reset waiting to be read), now:
    a socket with a timeout would first wait up to that long for something to read, and then
    its TimeoutError (an OSError) would read as a reset."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def wait_closed_by_server(sock: socket.socket, what: str) -> None:
    """Read (and drop) what the server sends until it closes the connection."""
    sock.settimeout(30.0)  # the failure bound: without the idle timeout it stays open an hour
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server did not close {what}") from None


def flood_sizes() -> tuple[int, int]:
    """(connections to open, the server's soft file limit): FLOOD and SERVER_NOFILE, scaled
    down when this machine's hard limit is too low for them (the flood must still be beyond
    the server's limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + SPARE_FILES:
        count = hard - SPARE_FILES
        server = min(SERVER_NOFILE, count * 9 // 10)
        warnings.warn(
            f"the hard limit on open files is {hard}: the flood is scaled to {count} "
            f"connections against a server limit of {server}",
            stacklevel=2,
        )
        return count, server
    if soft != resource.RLIM_INFINITY and soft < FLOOD + SPARE_FILES:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FLOOD + SPARE_FILES, hard))
    return FLOOD, SERVER_NOFILE


@pytest.fixture
def flood_socks() -> Iterator[list[tuple[str, socket.socket]]]:
    """The flood's sockets, (source address, socket), all closed at the end."""
    socks: list[tuple[str, socket.socket]] = []
    try:
        yield socks
    finally:
        for _source, sock in socks:
            with contextlib.suppress(OSError):
                sock.close()


def test_a_flood_of_idle_connections_does_not_keep_the_owner_out(flood_socks):
    """The caps alone keep the flood down: the idle timeout is the longest allowed, so no idle
    connection is closed for being idle while the test runs (with the default 5 s it would
    close them all whatever the caps did)."""
    count, nofile = flood_sizes()
    run = start_web(
        "demo", "--speed", "20", nofile=nofile, environ={IDLE_TIMEOUT_ENV: str(MAX_IDLE_TIMEOUT_S)}
    )
    try:
        caps = caps_for(8, nofile)  # the server's: --max-tabs 8, its file limit
        assert count > nofile > caps.total
        # Half from the owner's own address (its cap), half from many others (the total cap).
        sources = ["127.0.0.1"] * (count // 2) + [
            f"127.0.0.{2 + i % OTHER_ADDRESSES}" for i in range(count - count // 2)
        ]
        for source in sources:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            flood_socks.append((source, sock))
            sock.bind((source, 0))
            sock.settimeout(10.0)
            sock.connect(("127.0.0.1", run.port))

        async def owner() -> tuple[int, int]:
            timeout = aiohttp.ClientTimeout(total=30)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                async with http.get(run.open_url, allow_redirects=False) as answer:
                    with_token = answer.status
                async with http.get(run.url + "/", headers=run.headers) as page:
                    assert "<title>specmon demo --speed 20</title>" in await page.text()
                    return with_token, page.status

        assert asyncio.run(owner()) == (303, 200)
        assert run.proc.poll() is None

        def open_ones() -> list[str]:
            return [source for source, sock in flood_socks if not closed_by_server(sock)]

        wait_for(lambda: len(open_ones()) <= caps.total, f"at most {caps.total} left open")
        assert open_ones().count("127.0.0.1") <= caps.per_peer
        assert run.stop() == 130
        said = run.output()
        assert "Traceback" not in said, said[:2000]
        assert len(said.encode()) < MAX_OUTPUT_BYTES, said[:2000]
        assert "the limit per address" in said and "(the limit)" in said, said
    finally:
        run.kill()


def test_idle_connections_are_closed_after_the_idle_timeout_and_a_page_is_not():
    run = start_web("demo", "--speed", "20", environ={IDLE_TIMEOUT_ENV: "0.5"})
    probes: list[socket.socket] = []
    try:

        async def scenario() -> list[object]:
            async with aiohttp.ClientSession() as http:
                ws = await open_page(http, run)
                await read_screen_until(ws, rb"SIMULATED")
                silent, partial, served = (
                    socket.create_connection(("127.0.0.1", run.port)) for _ in range(3)
                )
                probes.extend((silent, partial, served))
                host = f"Host: 127.0.0.1:{run.port}\r\n"
                partial.sendall(f"GET / HTTP/1.1\r\n{host}".encode())  # never ends its head
                served.sendall(f"GET / HTTP/1.1\r\n{host}\r\n".encode())  # 403, then idle
                await asyncio.to_thread(wait_closed_by_server, silent, "a silent connection")
                await asyncio.to_thread(wait_closed_by_server, partial, "a half request head")
                await asyncio.to_thread(wait_closed_by_server, served, "a kept-alive one")
                await ws.send_json(["ping", "still there?"])  # the page outlived them all
                answer = await ws.receive(timeout=WAIT_LIMIT_S)
                while answer.type == aiohttp.WSMsgType.BINARY:
                    answer = await ws.receive(timeout=WAIT_LIMIT_S)
                return answer.json()

        assert asyncio.run(scenario()) == ["pong", "still there?"]
        assert run.stop() == 130
    finally:
        for sock in probes:
            sock.close()
        run.kill()


def test_a_bad_idle_timeout_is_one_line():
    done = run_web("demo", "--port", "0", environ={IDLE_TIMEOUT_ENV: "soon"})
    assert done.returncode == 2
    assert done.stderr == (
        f"specmon web: ${IDLE_TIMEOUT_ENV} must be a number of seconds above 0 and at most "
        "3600, got 'soon'\n"
    )


# ------------------------------------------------------------------ the limits, without a server


class FakeTransport:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.aborted = False

    def get_extra_info(self, name: str) -> object:
        return (self.peer, 40000) if name == "peername" else None

    def abort(self) -> None:
        self.aborted = True


class FakeHandler:
    def __init__(self) -> None:
        self.events: list[str] = []

    def connection_made(self, transport: object) -> None:
        self.events.append("made")

    def connection_lost(self, exc: object) -> None:
        self.events.append("lost")

    def data_received(self, data: bytes) -> None:
        self.events.append(data.decode())


def connect(limits: ConnectionLimits, peer: str) -> tuple[FakeTransport, FakeHandler | None]:
    handler = FakeHandler()
    gate = limits.protocol_factory(lambda: handler)()
    transport = FakeTransport(peer)
    gate.connection_made(transport)  # type: ignore[arg-type]
    return transport, (handler if gate.handler is not None else None)


def test_a_full_address_loses_its_oldest_connection_not_let_in_never_one_let_in():
    lines: list[str] = []
    limits = ConnectionLimits(Caps(per_peer=3, total=10), RateLog(lines.append))
    owner, _ = connect(limits, "127.0.0.1")
    limits.let_in(owner)  # its request passed the token check
    idle = [connect(limits, "127.0.0.1")[0] for _ in range(2)]
    newest, handler = connect(limits, "127.0.0.1")  # the address is full: the oldest idle goes
    assert handler is not None and handler.events == ["made"]
    assert idle[0].aborted and not idle[1].aborted and not owner.aborted
    assert limits.total == 3
    limits.let_in(idle[1])
    limits.let_in(newest)
    refused, handler = connect(limits, "127.0.0.1")  # all let in: the new one is refused
    assert refused.aborted and handler is None
    assert not owner.aborted and not idle[1].aborted and not newest.aborted
    other, handler = connect(limits, "10.0.0.2")  # another address has its own cap
    assert not other.aborted and handler is not None
    assert len(lines) == 2 and "the limit per address" in lines[0] and "refused" in lines[1]


def test_the_total_cap_closes_the_oldest_connection_not_let_in_of_any_address():
    limits = ConnectionLimits(Caps(per_peer=5, total=3), RateLog(lambda _line: None))
    first, _ = connect(limits, "127.0.0.2")
    second, _ = connect(limits, "127.0.0.3")
    owner, _ = connect(limits, "127.0.0.1")
    limits.let_in(first)
    fourth, handler = connect(limits, "127.0.0.4")
    assert not fourth.aborted
    assert second.aborted and not first.aborted and not owner.aborted and handler is not None
    assert limits.total == 3


def test_a_connection_gone_is_uncounted_once_and_its_handler_told():
    limits = ConnectionLimits(Caps(per_peer=2, total=2), RateLog(lambda _line: None))
    handler = FakeHandler()
    gate = limits.protocol_factory(lambda: handler)()
    gate.connection_made(FakeTransport("127.0.0.1"))  # type: ignore[arg-type]
    gate.data_received(b"GET /")
    gate.connection_lost(None)
    gate.connection_lost(None)
    assert handler.events == ["made", "GET /", "lost", "lost"]
    assert limits.total == 0
    connect(limits, "127.0.0.1")
    connect(limits, "127.0.0.1")
    assert limits.total == 2


def test_the_log_says_each_kind_once_per_interval_with_the_count():
    lines: list[str] = []
    now = [100.0]
    log = RateLog(lines.append, interval=10.0, clock=lambda: now[0])
    for _ in range(500):
        log.note("a", "refused a connection")
        log.note("b", "closed one")
        now[0] += 0.01
    assert lines == [
        "refused a connection (said once per 10 s at most)",
        "closed one (said once per 10 s at most)",
    ]
    now[0] = 111.0
    log.note("a", "refused a connection")
    assert lines[-1] == "refused a connection (500 times in the last 11 s)"


def test_the_loops_errors_are_one_line_without_a_traceback():
    lines: list[str] = []
    handle = loop_exception_handler(RateLog(lines.append))
    error = OSError(24, "Too many open files")
    for _ in range(1000):
        handle(None, {"message": "socket.accept() out of system resource", "exception": error})  # type: ignore[arg-type]
    assert lines == [
        "socket.accept() out of system resource: [Errno 24] Too many open files "
        "(said once per 10 s at most)"
    ]


def test_the_caps_stay_well_under_the_file_limit_and_above_a_browsers_needs():
    assert caps_for(8, 1024) == Caps(per_peer=32, total=256)
    assert caps_for(8, 100_000).total == MAX_CONNECTIONS
    assert caps_for(8, 160) == Caps(per_peer=32, total=40)
    assert caps_for(64, 1024).per_peer == 64 + 16  # every tab's WebSocket, and a browser's
