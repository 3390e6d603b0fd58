"""One streamed answer between the session's receiver thread and the UI: `AnswerFeed` is filled
on the hub thread and drained by the UI at its own frame rate (`Drained`).

A feed keeps only what the session's published view cannot give: the answer's text as it
arrives (handed over once, at the drain), each text chunk's arrival time, and the chunks (their
token counts colour the acceptance heat). Every number of the answer comes from the view
(`answer_numbers.view_numbers`: its finished row, else its in-flight row): the session's fold is
the one fold of the request's events."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass

from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.stream_limits import idle_note


@dataclass(frozen=True, slots=True)
class Drained:
    """What arrived for one answer since the last drain."""

    text: str
    arrivals: tuple[float, ...]
    """Arrival time (session clock, s) of each chunk that carried text, in order."""
    ended: RequestEnded | None
    """Set once, on the drain that first sees the end of the request."""


class AnswerFeed:
    """One streamed answer: filled on the hub thread, drained by the UI (any thread)."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._arrivals: list[float] = []
        self._ended: RequestEnded | None = None
        self._ended_seen = False
        self.future: concurrent.futures.Future[RequestEnded] | None = None
        self.canceller: Callable[[], None] | None = None
        """Cancels the request on the collector (set by the port)."""
        self.alive: Callable[[], bool] | None = None
        """Whether the session that streams this answer still runs (set by the port)."""
        self._chunks: list[StreamChunk] = []
        self.last_t: float | None = None
        """Session-clock time of the request's last event (its start, then each chunk)."""
        self._released = False
        """Whether the feed's buffers were dropped (`release`)."""
        self.dropped_turns = 0
        """The oldest turns the request was resent without, after the server said its context
        was too long (its RequestEnded's `dropped_turns`; runtime.prompt_loop)."""

    def on_event(self, event: RequestStarted | StreamChunk | RequestEnded) -> None:
        """Hub thread: keep the text, arrival time and chunk of one event of this request."""
        with self._lock:
            self.last_t = event.t
            if self._released:
                return  # released: nothing more is kept
            if isinstance(event, StreamChunk):
                self._chunks.append(event)
                if event.text:
                    self._parts.append(event.text)
                    self._arrivals.append(event.t)
            elif isinstance(event, RequestEnded):
                self._ended = event
                self.dropped_turns = max(0, event.dropped_turns)

    def drain(self) -> Drained:
        """The text that arrived since the last drain, and the end when it just arrived.

        A request whose task ended without the client's end event (cancelled before the stream
        began, or an unexpected error) is ended here, so an answer never stays open.
        """
        alive = self.alive
        if alive is not None and not alive():
            with self._lock:
                if self._ended is None:
                    self._ended = RequestEnded(
                        t=0.0,
                        request_id=self.request_id,
                        outcome="failed",
                        error="the monitoring session stopped",
                    )
        future = self.future
        if future is not None and future.done():
            with self._lock:
                if self._ended is None:
                    if future.cancelled():
                        self._ended = RequestEnded(
                            t=0.0, request_id=self.request_id, outcome="cancelled"
                        )
                    else:
                        exc = future.exception()
                        self._ended = RequestEnded(
                            t=0.0,
                            request_id=self.request_id,
                            outcome="failed",
                            error=f"{type(exc).__name__}: {exc}" if exc else "ended early",
                        )
        with self._lock:
            text = "".join(self._parts)
            self._parts.clear()
            arrivals = tuple(self._arrivals)
            self._arrivals.clear()
            ended = None
            if self._ended is not None and not self._ended_seen:
                ended, self._ended_seen = self._ended, True
        return Drained(text, arrivals, ended)

    def chunks(self) -> tuple[StreamChunk, ...]:
        """Every chunk so far, in arrival order (the acceptance heat reads their token counts)."""
        with self._lock:
            return tuple(self._chunks)

    @property
    def ended(self) -> bool:
        """Whether the end of the request arrived."""
        return self._ended is not None

    def release(self) -> None:
        """Drop what the stream grew (its chunks and text fragments): for an answer that was
        cancelled or failed, whose shown text is all that stays (the acceptance heat of such an
        answer is not drawn)."""
        with self._lock:
            self._released = True
            self._chunks = []
            self._parts = []
            self._arrivals = []

    @property
    def released(self) -> bool:
        return self._released

    def cancel(self) -> None:
        """Stop the request; the client ends it as "cancelled" (what arrived stays)."""
        if self.canceller is not None:
            self.canceller()
        elif self.future is not None:
            self.future.cancel()


def quiet_note(feed: AnswerFeed, now: float, idle_timeout_s: float) -> str | None:
    """While an answer streams and the server has sent nothing for a while: how long, and when
    the request gives up ("no data for 12 s — gives up at 60 s"); else None. `now`: the session
    clock."""
    last = feed.last_t
    if last is None or feed.ended:
        return None
    return idle_note(now - last, idle_timeout_s)
