"""`LivePort`: the `port.SessionPort` of `specmon chat`, `demo` and `watch` (connect to a
server, stream answers, read numbers, record, watch more servers).

It drives a `runtime.session.LiveSession`: the commands give it a `CollectorProcess`
(`runtime.session.open_session`: the hub, its sources and the recorder in their own process, so
rendering cannot skew arrival timestamps). The port never calls into the UI: the session's receiver
thread fills per-answer buffers (`answer_feed.AnswerFeed`) and publishes the typed view; the UI
drains and reads them at its own frame rate. Every number of an answer is read from that view
(its finished row, else its in-flight row): one fold of the events, the session state's. Nothing
here imports textual.

The runtime, the stream client and httpx are imported on first use, in the connect
worker thread, so the app paints its first frame without waiting for them. `specmon replay`
goes through `replay_port.ReplayPort` instead.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from specmon.core.events import Event, RequestEnded, RequestStarted, StreamChunk
from specmon.core.stream_limits import DEFAULT_IDLE_TIMEOUT_S
from specmon.core.views import SessionView
from specmon.ui.answer_feed import AnswerFeed, quiet_note
from specmon.ui.answer_numbers import AnswerNumbers, find_row, no_numbers, view_numbers
from specmon.ui.port import Ask, Connection, ServerSummary, server_address

if TYPE_CHECKING:
    from specmon.runtime.collector_messages import ServerSeen
    from specmon.runtime.session import LiveSession

SessionFactory = Callable[[], "LiveSession"]
"""Makes the session the port connects through (not yet started, or started by the command)."""


_answer_ids = itertools.count(1)


MAX_MODELS_NAMED = 8
"""The most model names a "not served" message lists (a server may list thousands)."""


def model_not_served(base_url: str, model: str, served: tuple[str, ...]) -> str:
    """Why `--model` cannot be used: the server's /v1/models does not list it; names the models
    it has (the first MAX_MODELS_NAMED, then how many more). Names are untrusted text: the
    screen shows them literally."""
    names = ", ".join(served[:MAX_MODELS_NAMED])
    if len(served) > MAX_MODELS_NAMED:
        names += f" and {len(served) - MAX_MODELS_NAMED} more"
    return (
        f"cannot use {base_url}: it does not serve model {model!r}; it serves {names} "
        "(--model picks one)"
    )


def _unauthorized(error: str) -> bool:
    return "401" in error or "AuthenticationError" in error


class LivePort:
    """Connects through a LiveSession (made by the cli) and streams answers through it."""

    def __init__(
        self,
        make_session: SessionFactory,
        *,
        model: str | None = None,
        require_model: bool = True,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        self._make_session = make_session
        self.idle_timeout_s = idle_timeout_s
        """The collector's stream idle timeout (shown while an answer waits for data)."""
        self._require_model = require_model
        """False for the dashboard (watch): a server that is down is shown as down."""
        self._model = model
        self._session: LiveSession | None = None
        self._starting: LiveSession | None = None
        self._aborted = False
        self._feeds: dict[str, AnswerFeed] = {}
        self._fresh_read: set[str] = set()
        """Ended answers whose numbers were read from a view published on demand (once each)."""
        self._lock = threading.Lock()
        self.server: ServerSummary | None = None
        self._seen: ServerSeen | None = None
        """The connected server as the collector identified it (its model list)."""

    # ------------------------------------------------------------ lifecycle

    def connect(self) -> Connection:
        """Start a session and identify the server (blocking: run it off the UI thread).

        A failed attempt stops its session, so `connect()` can simply be called again (retry).
        """
        self.close()
        if self._aborted:
            return Connection(None, "the app is closing")
        try:
            session = self._make_session()
            with self._lock:
                if self._aborted:
                    return Connection(None, "the app is closing")
                self._starting = session
            try:
                info = session.start()
            finally:
                with self._lock:
                    self._starting = None
        except Exception as exc:  # a bad --record path, a bad URL: shown, not raised
            return Connection(None, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
        if self._aborted:
            session.stop()
            return Connection(None, "the app is closing")
        seen = session.servers[0] if session.servers else None
        if self._require_model and (seen is None or not seen.models):
            session.stop()
            error = (seen.error if seen else None) or "the server lists no model"
            where = seen.base_url if seen else "the server"
            return Connection(
                None, f"cannot use {where}: {error}", unauthorized=_unauthorized(error)
            )
        wanted = self._model
        if self._require_model and wanted is not None and seen and wanted not in seen.models:
            session.stop()
            return Connection(
                None, model_not_served(seen.base_url, wanted, seen.models), retryable=False
            )
        session.subscribe(self._route)
        self._session = session
        self._seen = seen
        model = self._model or (seen.models[0] if seen and seen.models else info.model)
        url = seen.base_url if seen else (info.server or "")
        self.server = ServerSummary(
            url=url,
            model=model,
            draft_model=info.draft_model,
            method=info.method,
            n_spec=info.n_spec,
            vllm_version=info.vllm_version,
            simulated=info.simulated,
            max_model_len=seen.context_length(model) if seen and model else None,
        )
        return Connection(self.server)

    def abort(self) -> None:
        """The app is ending: a connection still being made is abandoned (a collector process
        still starting is ended, so the worker waiting for it returns now), and none is made
        after. Blocking for a moment: call it off the UI thread."""
        from specmon.runtime.session import CollectorProcess

        with self._lock:
            self._aborted = True
            starting = self._starting
        if isinstance(starting, CollectorProcess):
            starting.stop()

    def close(self) -> None:
        """Stop the session (cancels any answer, closes the recording)."""
        session, self._session = self._session, None
        if session is not None:
            session.stop()
        with self._lock:
            self._feeds.clear()
        self._fresh_read.clear()

    @property
    def connected(self) -> bool:
        return self._session is not None

    @property
    def models(self) -> tuple[str, ...]:
        seen = self._seen
        return seen.models if seen is not None else ()

    def use_model(self, model: str) -> ServerSummary:
        """The next questions go to `model` (one the server's /v1/models lists); a reconnect
        keeps it. ValueError (one line) otherwise."""
        server, seen = self.server, self._seen
        if server is None or seen is None:
            raise ValueError("not connected to a server")
        if model not in seen.models:
            raise ValueError(f"{seen.base_url} does not list model {model!r}")
        self._model = model
        self.server = replace(server, model=model, max_model_len=seen.context_length(model))
        return self.server

    @property
    def session(self) -> LiveSession | None:
        return self._session

    # ------------------------------------------------------------ answers

    def _route(self, event: Event) -> None:
        """Receiver (or hub) thread: hand request events to their feed."""
        if isinstance(event, StreamChunk | RequestStarted | RequestEnded):
            feed = self._feeds.get(event.request_id)
            if feed is not None:
                feed.on_event(event)
                if isinstance(event, RequestEnded):
                    with self._lock:
                        self._feeds.pop(event.request_id, None)

    def ask(self, ask: Ask) -> AnswerFeed:
        """Start streaming one answer; returns its feed at once."""
        from specmon.sources.stream_client import ChatRequest

        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        request = ChatRequest(
            prompt=ask.prompt,
            system=ask.system,
            model=self.server.model if self.server else None,
            max_tokens=ask.max_tokens,
            temperature=ask.temperature,
            top_p=ask.top_p,
            extra_body=ask.extra_body,
            messages=ask.messages,
            drop_on_overflow=True,  # one answer, resent without its oldest turns if need be
        )
        rid = f"chat{next(_answer_ids)}"
        feed = AnswerFeed(rid)
        with self._lock:
            self._feeds[rid] = feed  # before the request: its first event may come at once

        def cancel() -> None:
            with contextlib.suppress(RuntimeError):  # the session already stopped
                session.cancel(rid)

        feed.canceller = cancel
        feed.alive = lambda: session.alive
        session.submit_chat(request, request_id=rid)
        return feed

    def view(self, *, fresh: bool = False) -> SessionView | None:
        """The session's latest published view (lock-free), or None when not connected. With
        `fresh` the view is published now (under the session's fold lock)."""
        session = self._session
        if session is None:
            return None
        try:
            return session.view(fresh=fresh)
        except Exception:
            return None

    def numbers(self, feed: AnswerFeed) -> AnswerNumbers:
        """An answer's numbers, from the session's view of its request (the finished row, else
        the in-flight row: all acceptance sources, the verdict, the speed class, the GPU during
        it); all — before the view has a row for it.

        The session folds an event before the feed gets it, so once the feed saw the end the
        fold has the finished row; a view published before that still has the request in
        flight: then the view is published now, once per answer."""
        rid = feed.request_id
        view = self.view()
        if (
            feed.ended
            and find_row(view, rid, in_flight=False) is None
            and rid not in self._fresh_read
        ):
            self._fresh_read.add(rid)
            view = self.view(fresh=True)
        return view_numbers(view, rid) or no_numbers(rid)

    def quiet_note(self, feed: AnswerFeed) -> str | None:
        """While an answer streams and the server has sent nothing for a while: how long, and
        when the request gives up ("no data for 12 s — gives up at 60 s"); else None."""
        return quiet_note(feed, self.now(), self.idle_timeout_s)

    def now(self) -> float:
        """The session clock (the clock of every arrival time), in seconds."""
        session = self._session
        return session.now() if session is not None else 0.0

    # ------------------------------------------------------------ recording and markers

    @property
    def recording(self) -> str | None:
        """Where the session is being recorded (None: not recording)."""
        session = self._session
        return session.recording if session is not None else None

    def start_recording(self, path: str) -> str:
        """Start recording to a new file (blocking, bounded); raises with a one-line reason."""
        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        return session.start_recording(path)

    def stop_recording(self) -> str | None:
        """Stop recording; returns the file's path (None when none was being recorded)."""
        session = self._session
        return session.stop_recording() if session is not None else None

    def mark(self, label: str) -> None:
        """Add a user marker with a label to the session (and its recording)."""
        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        session.mark(label)

    # ------------------------------------------------------------ watched servers

    def add_target(self, url: str, *, api_key: str | None = None) -> str:
        """Watch one more server (blocking, bounded: run it off the UI thread); returns its base
        URL. Raises ValueError with a one-line reason for a URL that is not an http(s) server
        address or a server already watched, RuntimeError when not connected. `api_key`: a key
        typed for this server (sent to it only); without one it gets none, unless it is on the
        origin of a server of the command line."""
        from specmon.runtime.monitor import Target

        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        server_address(url)  # a bad URL: ValueError before anything is sent
        return session.add_target(Target(url.strip(), api_key=api_key or None)).base_url

    def remove_target(self, url: str) -> str:
        """Stop watching a server (blocking, bounded); returns its base URL."""
        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        return session.remove_target(url)
