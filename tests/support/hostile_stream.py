"""A loopback server that streams whatever a test says (an endless line, a stream that never
ends, a stall, malformed chunks, a torn last event): the hostile-stream tests of both stream
clients and of the app's port use it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from tests.support.loopback import LoopbackServer

Body = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class HostileServer(LoopbackServer):
    """Answers /v1/models; every POST gets a chunked text/event-stream whose body `body` writes
    (`head=False`: not even the response head)."""

    def __init__(self, body: Body, *, head: bool = True) -> None:
        self.body = body
        self.head = head
        super().__init__()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            if method == "GET" and path.startswith("/v1/models"):
                payload = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                    + payload
                )
            elif method == "POST":
                if self.head:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                    )
                    await self.body(reader, writer)
                    writer.write(b"0\r\n\r\n")
                else:
                    await reader.read()  # until the client gives up
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what these tests expect it to do
        finally:
            writer.close()


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One HTTP chunk, flushed (raises ConnectionError once the client hung up)."""
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


def event(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def content(text: str, tokens: int | None = None, finish: str | None = None) -> dict:
    chunk: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }
    if tokens is not None:
        chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5}
    return chunk


ROLE = {
    "id": "c",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
}
