"""A hostile HTTP server on loopback: per path, an answer that a well-behaved client must survive.

Each path maps to a behaviour:
- `Page(body)`: a 200 with that body (text/plain; as /metrics pages, JSON for the identity calls);
- `Trickle(body, every_s)`: the headers at once, then the body one byte every `every_s` seconds;
- `Silent()`: reads the request and never answers;
- `RedirectLoop()`: a 302 to the same path, for ever.
Unknown paths get a 404. Every answer closes its connection.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from tests.support.loopback import LoopbackServer


@dataclass(frozen=True)
class Page:
    body: bytes
    content_type: str = "text/plain; version=0.0.4"


@dataclass(frozen=True)
class Trickle:
    body: bytes
    every_s: float = 0.5


@dataclass(frozen=True)
class Silent:
    pass


@dataclass(frozen=True)
class RedirectLoop:
    pass


Behaviour = Page | Trickle | Silent | RedirectLoop

VERSION = Page(json.dumps({"version": "0.11.0"}).encode(), "application/json")
MODELS = Page(
    json.dumps({"object": "list", "data": [{"id": "hostile-model", "object": "model"}]}).encode(),
    "application/json",
)


class HostileServer(LoopbackServer):
    """Answers each path as `paths` says; /version and /v1/models answer normally unless given."""

    def __init__(self, paths: dict[str, Behaviour]) -> None:
        self.paths = {"/version": VERSION, "/v1/models": MODELS, **paths}
        self.hits: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = False
        super().__init__()

    def stop(self) -> None:
        """End the answers still running (a trickle, a silent wait), then the server."""

        async def end_answers() -> None:
            self._stopping = True  # a trickle ends at its next byte
            for writer in list(self._writers):
                writer.transport.abort()  # a silent wait ends now
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5)

        asyncio.run_coroutine_threadsafe(end_answers(), self._loop).result(10)
        super().stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode().split("?", 1)[0]
            self.hits[path] = self.hits.get(path, 0) + 1
            behaviour = self.paths.get(path)
            if isinstance(behaviour, Silent):
                await reader.read()  # until the client hangs up
            elif isinstance(behaviour, RedirectLoop):
                writer.write(
                    f"HTTP/1.1 302 Found\r\nlocation: {path}\r\ncontent-length: 0\r\n"
                    "connection: close\r\n\r\n".encode()
                )
            elif isinstance(behaviour, Page):
                writer.write(
                    f"HTTP/1.1 200 OK\r\ncontent-type: {behaviour.content_type}\r\n"
                    f"content-length: {len(behaviour.body)}\r\nconnection: close\r\n\r\n".encode()
                    + behaviour.body
                )
            elif isinstance(behaviour, Trickle):
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                    + f"content-length: {len(behaviour.body)}\r\nconnection: close\r\n\r\n".encode()
                )
                for i in range(len(behaviour.body)):
                    if self._stopping:
                        break
                    writer.write(behaviour.body[i : i + 1])
                    await writer.drain()
                    await asyncio.sleep(behaviour.every_s)
            else:
                writer.write(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)
            self._writers.discard(writer)
