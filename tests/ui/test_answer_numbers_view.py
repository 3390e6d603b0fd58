"""One path for each number of an answer: the live port reads them from the session's published
view (the finished row, else the in-flight row), never from a fold of its own; the feed keeps
only the text, the arrival times and the chunks. A stub session folds the events in a real
`SessionState` and hands them to the port after the fold, as the collector does."""

from __future__ import annotations

from collections.abc import Callable

from specmon.core.events import Event, RequestEnded, RequestStarted, SessionInfo, StreamChunk
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.runtime.collector_messages import ServerSeen
from specmon.ui.answer_feed import AnswerFeed
from specmon.ui.answer_numbers import numbers_from_row
from specmon.ui.live_port import LivePort
from specmon.ui.port import Ask

MODEL = "m"


class StubSession:
    """The parts of a LiveSession the port uses; `publish()` is the collector's timed publish."""

    def __init__(self) -> None:
        self.state = SessionState(SessionInfo(server="http://stub", model=MODEL, n_spec=4))
        self.servers = (ServerSeen("http://stub", (MODEL,), None),)
        self.subscribers: list[Callable[[Event], None]] = []
        self.fresh_reads = 0
        self.alive = True

    def start(self) -> SessionInfo:
        return self.state.info

    def subscribe(self, subscriber: Callable[[Event], None]) -> None:
        self.subscribers.append(subscriber)

    def submit_chat(self, request: object, *, request_id: str) -> str:
        return request_id

    def cancel(self, request_id: str) -> None:
        pass

    def stop(self) -> None:
        self.alive = False

    def now(self) -> float:
        return 0.0

    def view(self, *, fresh: bool = False) -> SessionView | None:
        if fresh:
            self.fresh_reads += 1
            return self.state.publish()
        return self.state.published_view

    def emit(self, event: Event) -> None:
        """The fold first, then the subscribers (the session's order)."""
        self.state.apply(event)
        for subscriber in self.subscribers:
            subscriber(event)


def _stream(session: StubSession, rid: str, tokens: int, t0: float = 0.0) -> None:
    session.emit(RequestStarted(t=t0, request_id=rid, source="http://stub", model=MODEL))
    for i in range(1, tokens // 3 + 1):
        t = t0 + 0.1 + 0.02 * i
        session.emit(StreamChunk(t=t, request_id=rid, text=f"w{i} ", completion_tokens=3 * i))


def _connected() -> tuple[LivePort, StubSession]:
    session = StubSession()
    port = LivePort(lambda: session)  # type: ignore[arg-type, return-value]
    assert port.connect().server is not None
    return port, session


def _finished_numbers(session: StubSession, rid: str):
    view = session.state.publish()
    row = next(r for r in view.rows if r.request_id == rid)
    return numbers_from_row(row, view.gpu)


def test_a_streaming_answers_numbers_are_its_in_flight_row_and_none_before_the_view_has_it():
    port, session = _connected()
    feed = port.ask(Ask("hi"))
    _stream(session, feed.request_id, 30)
    # Nothing published yet: the port has no numbers of its own for the answer.
    numbers = port.numbers(feed)
    assert (numbers.tokens, numbers.decode_tok_s, numbers.acceptance_length) == (None, None, None)
    assert numbers.request_id == feed.request_id
    view = session.state.publish()
    (row,) = view.in_flight
    assert port.numbers(feed) == numbers_from_row(row, view.gpu)
    assert port.numbers(feed).tokens == 30


def test_an_ended_answer_gets_its_finished_rows_numbers_even_from_a_view_published_before_the_end():
    port, session = _connected()
    feed = port.ask(Ask("hi"))
    rid = feed.request_id
    _stream(session, rid, 30)
    session.state.publish()  # the last timed publish: the request still in flight
    session.emit(RequestEnded(t=1.0, request_id=rid, outcome="ok", completion_tokens=30))
    assert feed.drain().ended is not None
    numbers = port.numbers(feed)
    assert numbers == _finished_numbers(session, rid)
    assert numbers.flag not in ("running", "unjudged")  # the finished row's verdict
    assert session.fresh_reads == 1
    port.numbers(feed)
    assert session.fresh_reads == 1  # one publish on demand per answer, not one per read


def test_the_feed_keeps_the_text_arrivals_and_chunks_only():
    feed = AnswerFeed("r1")
    feed.on_event(RequestStarted(t=0.0, request_id="r1", source="s", model=MODEL))
    feed.on_event(StreamChunk(t=0.2, request_id="r1", text="Hello", completion_tokens=1))
    feed.on_event(StreamChunk(t=0.3, request_id="r1", text=None, completion_tokens=1))
    feed.on_event(StreamChunk(t=0.4, request_id="r1", text=" you", completion_tokens=5))
    drained = feed.drain()
    assert (drained.text, drained.arrivals, drained.ended) == ("Hello you", (0.2, 0.4), None)
    assert [c.completion_tokens for c in feed.chunks()] == [1, 1, 5]
    feed.release()
    assert feed.chunks() == () and feed.released
