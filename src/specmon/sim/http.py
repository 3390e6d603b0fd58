"""A small HTTP/1.1 server on asyncio streams and h11 (keep-alive, chunked streaming).

Why not an ASGI framework: the simulator must serve tens of thousands of streamed tokens a second
on one core and be started inside any thread's event loop without extra dependencies; h11 is a
well-kept HTTP/1.1 state machine (httpx's own), so the protocol parsing is not hand-written.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import h11

MAX_BODY = 16 * 1024 * 1024
WRITE_HIGH_WATER = 256 * 1024
SIMULATED_HEADER = (b"x-specmon-simulated", b"1")


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes


class Responder:
    """Sends one response on a connection: whole (`send`) or streamed (`start`/`write`/`end`)."""

    def __init__(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, head: bool = False
    ) -> None:
        self._conn = conn
        self._writer = writer
        self._head = head
        """A HEAD request: the headers of the GET answer, no body (h11 refuses one)."""
        self.started = False
        self.finished = False
        self.aborted = False

    @property
    def gone(self) -> bool:
        """True once the peer went away or the connection was aborted."""
        return self.aborted or self._writer.transport.is_closing()

    def _headers(
        self, content_type: str | None, extra: Iterable[tuple[str, str]]
    ) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"date", email.utils.formatdate(usegmt=True).encode()),
            (b"server", b"uvicorn"),
            SIMULATED_HEADER,
        ]
        if content_type:
            headers.append((b"content-type", content_type.encode()))
        headers.extend((k.encode(), v.encode()) for k, v in extra)
        return headers

    async def send(
        self,
        status: int,
        body: bytes,
        content_type: str | None = "application/json",
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        """A complete response with a Content-Length."""
        if self.gone:
            return
        hdrs = self._headers(content_type if body or content_type else None, headers)
        hdrs.append((b"content-length", str(len(body)).encode()))
        out = self._conn.send(h11.Response(status_code=status, headers=hdrs))
        if body and not self._head:
            out += self._conn.send(h11.Data(data=body))
        out += self._conn.send(h11.EndOfMessage())
        self.started = self.finished = True
        self._writer.write(out)
        await self._drain()

    async def start(
        self, status: int, content_type: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        """Begin a streamed response (chunked transfer encoding)."""
        hdrs = self._headers(content_type, headers)
        self.started = True
        if not self.gone:
            self._writer.write(self._conn.send(h11.Response(status_code=status, headers=hdrs)))

    async def write(self, data: bytes) -> bool:
        """Stream `data`; False if the peer is gone."""
        if self.gone:
            return False
        self._writer.write(self._conn.send(h11.Data(data=data)))
        if self._writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await self._drain()
        return not self.gone

    async def end(self) -> None:
        if self.gone:
            return
        self._writer.write(self._conn.send(h11.EndOfMessage()))
        self.finished = True
        await self._drain()

    def abort(self) -> None:
        """Drop the connection at once, mid-response (no terminating chunk)."""
        self.aborted = True
        self._writer.transport.abort()

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError):
            self.aborted = True


Handler = Callable[[HttpRequest, Responder], Awaitable[None]]


class HttpServer:
    """Serves `handler` on host:port; `stop()` closes the listener and every connection."""

    def __init__(self, handler: Handler, host: str, port: int) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = port
        self.connections_accepted = 0
        """TCP connections accepted so far (keep-alive reuses one for many requests)."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self._host, self._port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.connections_accepted += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, reader, writer)
                if request is None:
                    break
                responder = Responder(conn, writer, head=request.method == "HEAD")
                try:
                    await self._handler(request, responder)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    traceback.print_exc(file=sys.stderr)
                    if not responder.started:
                        await responder.send(
                            500,
                            b'{"error":{"message":"Internal Server Error","type":'
                            b'"InternalServerError","param":null,"code":500}}',
                        )
                    else:
                        responder.abort()
                if responder.gone or not responder.finished:
                    break
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> HttpRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                await self._bad_request(conn, writer)
                return None
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                try:
                    conn.receive_data(data)
                except h11.RemoteProtocolError:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    responder = Responder(conn, writer)
                    await responder.send(413, b'{"detail":"Request Entity Too Large"}')
                    return None
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                target = head.target.decode("latin-1")
                path, _, query = target.partition("?")
                headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers
                }
                return HttpRequest(head.method.decode("ascii"), path, query, headers, bytes(body))
            else:  # ConnectionClosed, or PAUSED on a connection that must close
                return None

    async def _bad_request(self, conn: h11.Connection, writer: asyncio.StreamWriter) -> None:
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                await Responder(conn, writer).send(400, b'{"detail":"Bad Request"}')
