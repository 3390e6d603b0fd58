"""Fixtures for component tests: a simulated server on a free loopback port, and a canned SSE
server for response shapes the simulator does not produce (reasoning, per-request spec metrics)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest

from specmon.sim.server import SimConfig, start_in_thread


@pytest.fixture
def sim() -> Iterator:
    """A fast simulated server (n_spec 8), its logs discarded."""
    with start_in_thread(SimConfig(speed=50.0, n_spec=8, seed=1), log_sink=lambda _l: None) as s:
        yield s


class CannedServer:
    """A loopback HTTP server that answers every POST with a fixed SSE body (vLLM-shaped)."""

    def __init__(self, chunks: list[dict], models: tuple[str, ...] = ("canned-model",)) -> None:
        self.chunks = chunks
        self.models = models
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        self.headers.append(headers)
        body = b""
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        if method == "GET" and path.startswith("/v1/models"):
            payload = json.dumps(
                {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
            ).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                + payload
            )
        elif method == "GET" and path == "/version":
            payload = b'{"version": "0.11.0"}'
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                + payload
            )
        elif method == "POST":
            self.requests.append(json.loads(body))
            sse = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in self.chunks)
            sse += b"data: [DONE]\n\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(sse)}\r\nconnection: close\r\n\r\n".encode()
                + sse
            )
        else:
            writer.write(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
        await writer.drain()
        writer.close()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


@pytest.fixture
def canned():
    servers: list[CannedServer] = []

    def start(chunks: list[dict], **kwargs) -> CannedServer:
        server = CannedServer(chunks, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
