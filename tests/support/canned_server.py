"""A canned SSE server for response shapes the simulator does not produce (reasoning,
per-request spec metrics)."""

from __future__ import annotations

import asyncio
import json

from tests.support.loopback import LoopbackServer


class CannedServer(LoopbackServer):
    """A loopback HTTP server that answers every POST with a fixed SSE body (vLLM-shaped)."""

    def __init__(self, chunks: list[dict], models: tuple[str, ...] = ("canned-model",)) -> None:
        self.chunks = chunks
        self.models = models
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        super().__init__()

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
