"""Fakes and helpers of the Textual app tests: a port without a server (`FakePort`, `FakeFeed`;
its answers' events are folded by a real `SessionState`, whose view gives their numbers, as the
live port's session does),
a real port on a simulator (`sim_port`), a server that answers 401, and `screen_text` (waiting
for the app: tests.support.waiting.wait_for_app)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from tests.support.loopback import LoopbackServer

from specmon.core.events import RequestEnded, RequestStarted, SessionInfo, StreamChunk
from specmon.core.session_state import SessionState
from specmon.core.stream_limits import DEFAULT_IDLE_TIMEOUT_S
from specmon.core.views import SessionView
from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.ui.answer_feed import AnswerFeed, quiet_note
from specmon.ui.answer_numbers import AnswerNumbers, no_numbers, view_numbers
from specmon.ui.live_port import LivePort
from specmon.ui.port import Ask, Connection, ServerSummary, SessionPort

SIM_SERVER = ServerSummary(
    url="http://127.0.0.1:8000",
    model="cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
    draft_model="z-lab/gemma-4-26B-A4B-it-DFlash",
    method="dflash",
    n_spec=8,
    vllm_version="0.20.2",
    simulated=True,
    max_model_len=8192,
)


class FakePort:
    """A port without a server: `connect()` returns `connection`; each `ask()` answers at once
    with the next scripted answer (text chunks of fixed sizes at fixed times), or stays open
    (`hold=True`) until the test feeds it."""

    def __init__(
        self,
        connection: Connection | None = None,
        answers: list[list[str]] | None = None,
        *,
        hold: bool = False,
    ) -> None:
        self.connection = connection or Connection(SIM_SERVER)
        self.answers = list(answers or [])
        self.hold = hold
        self.requests: list[Ask] = []
        self.feeds: list[AnswerFeed] = []
        self.connects = 0
        self._up = False
        self.fake_view: SessionView | None = None
        """What view() returns (a deterministic view for the dashboard)."""
        self.marks: list[str] = []
        self.fake_recording: str | None = None
        self.recordings: list[str] = []
        self.server: ServerSummary | None = None
        self.served: tuple[str, ...] = ()
        """The models the fake server lists (empty: only the connection's model)."""
        self.aborted = False
        self.idle_timeout_s = DEFAULT_IDLE_TIMEOUT_S
        self.state = SessionState(SessionInfo(n_spec=8, simulated=True))
        """Folds the answers' events (as the live session does); its view gives their numbers
        where `fake_view` has no row for them."""

    def _route(self, feed: AnswerFeed, event: RequestStarted | StreamChunk | RequestEnded) -> None:
        """An answer's event reaches the session's fold, then its feed (as on the live port)."""
        self.state.apply(event)
        feed.on_event(event)

    def abort(self) -> None:
        self.aborted = True

    def connect(self) -> Connection:
        self.connects += 1
        self._up = self.connection.server is not None
        self.server = self.connection.server
        return self.connection

    @property
    def connected(self) -> bool:
        return self._up

    @property
    def models(self) -> tuple[str, ...]:
        server = self.server
        if server is None:
            return ()
        return self.served or ((server.model,) if server.model else ())

    def use_model(self, model: str) -> ServerSummary:
        if self.server is None:
            raise ValueError("not connected to a server")
        if model not in self.models:
            raise ValueError(f"{self.server.url} does not list model {model!r}")
        self.server = replace(self.server, model=model)
        return self.server

    def close(self) -> None:
        self._up = False

    def view(self) -> SessionView | None:
        return self.fake_view

    def mark(self, label: str) -> None:
        self.marks.append(label)

    @property
    def recording(self) -> str | None:
        return self.fake_recording

    def start_recording(self, path: str) -> str:
        if self.fake_recording is not None:
            raise RuntimeError(f"already recording to {self.fake_recording}")
        self.fake_recording = path
        self.recordings.append(path)
        return path

    def stop_recording(self) -> str | None:
        path, self.fake_recording = self.fake_recording, None
        return path

    def numbers(self, feed: AnswerFeed) -> AnswerNumbers:
        rid = feed.request_id
        return (
            view_numbers(self.fake_view, rid)
            or view_numbers(self.state.view(), rid)
            or no_numbers(rid)
        )

    def quiet_note(self, feed: AnswerFeed) -> str | None:
        return quiet_note(feed, self.now(), self.idle_timeout_s)

    def now(self) -> float:
        return 0.0

    def add_target(self, url: str, *, api_key: str | None = None) -> str:
        raise RuntimeError("the fake port watches no other server")

    def remove_target(self, url: str) -> str:
        raise RuntimeError("the fake port watches no other server")

    def ask(self, request: Ask) -> AnswerFeed:
        self.requests.append(request)
        rid = f"r{len(self.requests)}"
        feed = FakeFeed(rid, self._route)
        self.feeds.append(feed)
        feed.emit(RequestStarted(t=0.0, request_id=rid, source="fake", model="m"))
        if not self.hold:
            chunks = self.answers.pop(0) if self.answers else ["Hello."]
            feed.play(chunks)
            feed.end()
        return feed


def as_port(port: FakePort) -> SessionPort:
    """A FakePort is a SessionPort (mypy checks it has everything of the Protocol)."""
    return port


class FakeFeed(AnswerFeed):
    """A feed the test drives: chunks of 4 tokens every 20 ms after a 100 ms TTFT."""

    def __init__(
        self,
        request_id: str,
        route: Callable[[AnswerFeed, RequestStarted | StreamChunk | RequestEnded], None],
    ) -> None:
        super().__init__(request_id)
        self._route = route
        self.t = 0.1
        self.tokens = 0
        self.cancelled = False

    def play(self, chunks: list[str]) -> None:
        for text in chunks:
            self.tokens += 1 if self.tokens == 0 else 4
            self.emit(
                StreamChunk(
                    t=self.t, request_id=self.request_id, text=text, completion_tokens=self.tokens
                )
            )
            self.t += 0.02

    def emit(self, event: RequestStarted | StreamChunk | RequestEnded) -> None:
        """One event of this answer, through the port (the session's fold, then the feed)."""
        self._route(self, event)

    def end(self, outcome: str = "ok", error: str | None = None) -> None:
        self.emit(
            RequestEnded(
                t=self.t,
                request_id=self.request_id,
                outcome=outcome,  # type: ignore[arg-type]
                completion_tokens=self.tokens,
                finish_reason="stop" if outcome == "ok" else None,
                error=error,
            )
        )

    def cancel(self) -> None:
        self.cancelled = True
        self.end("cancelled")


@contextlib.contextmanager
def sim_port(config: SimConfig) -> Iterator[tuple[LivePort, str]]:
    with start_in_thread(config, log_sink=lambda _l: None) as sim:

        def make() -> CollectorProcess:
            # The collector in its own process, as `specmon chat` runs it.
            return CollectorProcess(SessionConfig((Target(sim.url),)), state_factory(None))

        port = LivePort(make)
        try:
            yield port, sim.url
        finally:
            port.close()


class Status401Server(LoopbackServer):
    """A loopback server that answers every request with vLLM's 401 body."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"error": "Unauthorized"}'
        writer.write(
            b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()


def screen_text(app) -> str:
    """The screen as plain text, line by line (what a person would read)."""
    # Textual's compositor renders the current screen to strips; this is what gets painted.
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)


def arrived_text(feed: AnswerFeed) -> str:
    """Every text fragment that reached the feed, in arrival order (its chunks' text)."""
    return "".join(chunk.text or "" for chunk in feed.chunks())
