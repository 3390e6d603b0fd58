"""A tiny HTTP server on a free loopback port, run on its own event loop in a thread: the base of
the canned servers that tests use for answers the simulator does not give (fixed SSE bodies, a
401). Subclasses write `_handle(reader, writer)`."""

from __future__ import annotations

import asyncio
import threading


class LoopbackServer:
    """Starts listening on 127.0.0.1 (a free port) at construction; `stop()` ends it and the
    connections it is still handling."""

    def __init__(self) -> None:
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
        raise NotImplementedError

    async def _shutdown(self) -> None:
        """Stop listening and end the connections still being handled (a trickle, a stall) on the
        running loop, so that none is left to finish after the loop is closed."""
        self._server.close()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class SilentServer(LoopbackServer):
    """Accepts connections and never answers (a hung server): nothing can identify it."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client hangs up
        writer.close()
