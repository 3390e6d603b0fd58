"""The app's one door to the runtime: connect to a server, stream answers, read numbers.

Everything the Textual app asks of the monitoring runtime goes through `SessionPort`, which
drives a `runtime.session.LiveSession`: `specmon chat`, `demo` and `watch` give it a
`CollectorProcess` (the hub, its sources and the recorder in their own process, so rendering
cannot skew arrival timestamps), tests may give it an in-process one. The port never calls into
the UI: the session's receiver thread fills per-answer buffers (`AnswerFeed`) and publishes the
typed view; the UI drains and reads them at its own frame rate. Nothing here imports textual.

The runtime, the stream client (openai) and httpx are imported on first use, in the connect
worker thread, so the app paints its first frame without waiting for them.

`specmon replay` goes through `ReplayPort` instead: a `runtime.replay_session.ReplaySession` the
cli made from a recording it read; the replay screen reads the view at the play head and moves
the play head through it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from specmon.core.events import Event, RequestEnded, RequestStarted, StreamChunk
from specmon.core.stream_limits import DEFAULT_IDLE_TIMEOUT_S, idle_note
from specmon.core.stream_stats import RequestStats, RequestTrace, request_stats
from specmon.core.views import GpuView, RequestRow, ServerView, SessionView

if TYPE_CHECKING:
    from specmon.runtime.monitor import Monitor
    from specmon.runtime.replay_session import ReplayPosition, ReplaySession, ReplayTimeline
    from specmon.runtime.session import LiveSession

SessionFactory = Callable[[], "LiveSession | Monitor"]
"""Makes the (not yet started) session the port connects through; a bare Monitor is run as an
in-process session."""

MODELS_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Ask:
    """One question to stream an answer to: the prompt, the conversation before it (role,
    content pairs, oldest first) and the sampling controls (None = the server's default)."""

    prompt: str
    messages: tuple[tuple[str, str], ...] = ()
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    extra_body: Mapping[str, Any] | None = None


_answer_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """What the header shows about the server (None = not known)."""

    url: str
    model: str | None
    draft_model: str | None
    method: str | None
    n_spec: int | None
    vllm_version: str | None
    simulated: bool
    max_model_len: int | None


@dataclass(frozen=True, slots=True)
class Connection:
    """The outcome of connecting: `server` when it answered, else `error` (one line)."""

    server: ServerSummary | None
    error: str | None = None
    unauthorized: bool = False


@dataclass(frozen=True, slots=True)
class Drained:
    """What arrived for one answer since the last drain."""

    text: str
    arrivals: tuple[float, ...]
    """Arrival time (session clock, s) of each chunk that carried text, in order."""
    ended: RequestEnded | None
    """Set once, on the drain that first sees the end of the request."""


FlagKind = Literal["ok", "transition", "vanilla", "failed", "unjudged"]


@dataclass(frozen=True, slots=True)
class AnswerNumbers:
    """The numbers shown under one answer (None = not measured; shown as —)."""

    tokens: int | None
    decode_tok_s: float | None
    ttft_s: float | None
    acceptance_length: float | None
    acceptance_rate: float | None
    al_source: str | None
    """"server" (vLLM's per-request metrics), "chunks" (tokens per stream chunk) or "metrics"
    (/metrics deltas around the request)."""
    gpu_temp_c: float | None = None
    """Highest GPU temperature sampled while the request ran."""
    sm_clock_mhz: float | None = None
    """Lowest SM clock sampled while the request ran."""
    flag: FlagKind = "unjudged"
    reasons: tuple[str, ...] = ()
    """Why the request was flagged (vanilla speed, transition) or failed, in words."""
    request_id: str | None = None


def numbers_from(stats: RequestStats) -> AnswerNumbers:
    """The answer's numbers from the feed's own trace (before the session's view has the row);
    the server's per-request speculative metrics first, the client's chunk sizes second."""
    spec = stats.server_spec
    al: float | None = None
    rate: float | None = None
    source: str | None = None
    if spec is not None and spec.mean_acceptance_length is not None:
        al, rate, source = spec.mean_acceptance_length, spec.draft_acceptance_rate, "server"
    elif stats.client_acceptance_length is not None:
        al, source = stats.client_acceptance_length, "chunks"
    return AnswerNumbers(
        tokens=stats.completion_tokens,
        decode_tok_s=stats.decode_tok_s,
        ttft_s=stats.ttft_s,
        acceptance_length=al,
        acceptance_rate=rate,
        al_source=source,
    )


def gpu_during(
    gpu: GpuView, t0: float | None, t1: float | None
) -> tuple[float | None, float | None]:
    """(highest temperature, lowest SM clock) over the GPU samples taken between t0 and t1
    (every GPU of the session); (None, None) when no sample fell in the interval."""
    if t0 is None:
        return None, None
    temps: list[float] = []
    clocks: list[float] = []
    for h in gpu.history:
        for t, temp, clock in zip(h.t, h.temperature_c, h.sm_clock_mhz, strict=False):
            if t0 <= t and (t1 is None or t <= t1):
                if temp is not None:
                    temps.append(temp)
                if clock is not None:
                    clocks.append(clock)
    return (max(temps) if temps else None, min(clocks) if clocks else None)


def numbers_from_row(row: RequestRow, gpu: GpuView) -> AnswerNumbers:
    """The answer's numbers from the session's typed view of its request."""
    a = row.acceptance
    temp, clock = gpu_during(gpu, row.t_send, row.t_end)
    flag: FlagKind = "unjudged"
    reasons: tuple[str, ...] = ()
    if row.outcome in ("failed", "cancelled"):
        flag = "failed"
        reasons = (f"{row.outcome}: {row.error or ''}",)
    elif row.speed_class is not None and row.speed_class.kind != "ok":
        flag = "vanilla" if row.speed_class.kind == "vanilla-speed" else "transition"
        reasons = tuple(text or code for code, text in row.speed_class.reasons)
    elif row.vanilla is not None and row.vanilla.flagged:
        flag = "vanilla"
        reasons = tuple(text or code for code, text in row.vanilla.reasons)
    elif row.vanilla is not None and row.vanilla.judged:
        flag = "ok"
    return AnswerNumbers(
        tokens=row.completion_tokens,
        decode_tok_s=row.decode_tok_s,
        ttft_s=row.ttft_s,
        acceptance_length=a.acceptance_length if a else None,
        acceptance_rate=a.draft_acceptance_rate if a else None,
        al_source=a.source if a else None,
        gpu_temp_c=temp,
        sm_clock_mhz=clock,
        flag=flag,
        reasons=reasons,
        request_id=row.request_id,
    )


class AnswerFeed:
    """One streamed answer: filled on the hub thread, drained by the UI (any thread)."""

    def __init__(self, request_id: str, n_spec: int | None) -> None:
        self.request_id = request_id
        self._n_spec = n_spec
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._arrivals: list[float] = []
        self._ended: RequestEnded | None = None
        self._ended_seen = False
        self._trace = RequestTrace(request_id)
        self.future: concurrent.futures.Future[RequestEnded] | None = None
        self.canceller: Callable[[], None] | None = None
        """Cancels the request on the collector (set by the port)."""
        self.alive: Callable[[], bool] | None = None
        """Whether the session that streams this answer still runs (set by the port)."""
        self.all_text: list[str] = []
        """Every text fragment in arrival order (kept for checks; the answer's full text)."""
        self._chunks: list[StreamChunk] = []
        self.last_t: float | None = None
        """Session-clock time of the request's last event (its start, then each chunk)."""
        self._final: AnswerNumbers | None = None
        """The numbers kept when the feed's buffers were released."""

    def on_event(self, event: RequestStarted | StreamChunk | RequestEnded) -> None:
        """Hub thread: fold one event of this request."""
        with self._lock:
            self.last_t = event.t
            if self._final is not None:
                return  # released: nothing more is kept
            self._trace.add(event)
            if isinstance(event, StreamChunk):
                self._chunks.append(event)
                if event.text:
                    self._parts.append(event.text)
                    self._arrivals.append(event.t)
                    self.all_text.append(event.text)
            elif isinstance(event, RequestEnded):
                self._ended = event

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

    def numbers(self) -> AnswerNumbers:
        """The answer's numbers so far (complete once the request ended)."""
        with self._lock:
            if self._final is not None:
                return self._final
            stats = request_stats(self._trace, n_spec=self._n_spec)
        return numbers_from(stats)

    def release(self) -> None:
        """Drop what the stream grew (its chunks, text fragments and trace), keeping only its
        numbers: for an answer that was cancelled or failed, whose shown text is all that
        stays (the acceptance heat of such an answer is not drawn)."""
        with self._lock:
            if self._final is None:
                self._final = numbers_from(request_stats(self._trace, n_spec=self._n_spec))
            self._trace = RequestTrace(self.request_id)
            self._chunks = []
            self.all_text = []
            self._parts = []
            self._arrivals = []

    @property
    def released(self) -> bool:
        return self._final is not None

    def retained(self) -> int:
        """How many per-chunk items the feed holds (chunks, fragments, trace entries)."""
        with self._lock:
            return (
                len(self._chunks)
                + len(self.all_text)
                + len(self._parts)
                + len(self._arrivals)
                + len(self._trace.chunk_t)
            )

    def cancel(self) -> None:
        """Stop the request; the client ends it as "cancelled" (what arrived stays)."""
        if self.canceller is not None:
            self.canceller()
        elif self.future is not None:
            self.future.cancel()


def _unauthorized(error: str) -> bool:
    return "401" in error or "AuthenticationError" in error


class SessionPort:
    """Connects through a LiveSession (made by the cli) and streams answers through it."""

    def __init__(
        self,
        make_session: SessionFactory,
        *,
        api_key: str | None = None,
        model: str | None = None,
        require_model: bool = True,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        self._make_session = make_session
        self.idle_timeout_s = idle_timeout_s
        """The collector's stream idle timeout (shown while an answer waits for data)."""
        self._require_model = require_model
        """False for the dashboard (watch): a server that is down is shown as down."""
        self._api_key = api_key
        self._model = model
        self._session: LiveSession | None = None
        self._starting: LiveSession | None = None
        self._aborted = False
        self._feeds: dict[str, AnswerFeed] = {}
        self._lock = threading.Lock()
        self.server: ServerSummary | None = None

    # ------------------------------------------------------------ lifecycle

    def connect(self) -> Connection:
        """Start a session and identify the server (blocking: run it off the UI thread).

        A failed attempt stops its session, so `connect()` can simply be called again (retry).
        """
        self.close()
        if self._aborted:
            return Connection(None, "the app is closing")
        try:
            from specmon.runtime.monitor import Monitor
            from specmon.runtime.session import InProcessSession
            from specmon.sources.stream_client import resolve_api_key

            self._api_key = resolve_api_key(self._api_key)
            made = self._make_session()
            session: LiveSession = InProcessSession.of(made) if isinstance(made, Monitor) else made
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
        session.subscribe(self._route)
        self._session = session
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
            max_model_len=self._max_model_len(url, model) if model else None,
        )
        return Connection(self.server)

    def _max_model_len(self, base: str, model: str) -> int | None:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            resp = httpx.get(base + "/v1/models", headers=headers, timeout=MODELS_TIMEOUT_S)
            if resp.status_code != 200:
                return None
            body = resp.json()
        except Exception:
            return None
        data = body.get("data") if isinstance(body, dict) else None
        for card in data if isinstance(data, list) else []:
            if isinstance(card, dict) and card.get("id") == model:
                value = card.get("max_model_len")
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
        return None

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

    @property
    def connected(self) -> bool:
        return self._session is not None

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
        )
        rid = f"chat{next(_answer_ids)}"
        feed = AnswerFeed(rid, self.server.n_spec if self.server else None)
        with self._lock:
            self._feeds[rid] = feed  # before the request: its first event may come at once

        def cancel() -> None:
            with contextlib.suppress(RuntimeError):  # the session already stopped
                session.cancel(rid)

        feed.canceller = cancel
        feed.alive = lambda: session.alive
        session.submit_chat(request, request_id=rid)
        return feed

    def view(self) -> SessionView | None:
        """The session's latest published view (lock-free), or None when not connected."""
        session = self._session
        if session is None:
            return None
        try:
            return session.view()
        except Exception:
            return None

    def numbers(self, feed: AnswerFeed) -> AnswerNumbers:
        """An answer's numbers: from the session's view of its request when it has one (all
        acceptance sources, the vanilla-speed verdict, the speed class, the GPU during it),
        else from the feed."""
        view = self.view()
        if view is not None:
            rid = feed.request_id
            # A view published before the feed saw the end still has the request in flight,
            # with fewer tokens: once the feed ended, only the finished row is newer than it.
            candidates = view.rows if feed.ended else (*view.rows, *view.in_flight)
            for row in reversed(candidates):
                if row.request_id == rid:
                    return numbers_from_row(row, view.gpu)
        return feed.numbers()

    def quiet_note(self, feed: AnswerFeed) -> str | None:
        """While an answer streams and the server has sent nothing for a while: how long, and
        when the request gives up ("no data for 12 s — gives up at 60 s"); else None."""
        last = feed.last_t
        if last is None or feed.ended:
            return None
        return idle_note(self.now() - last, self.idle_timeout_s)

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

    @staticmethod
    def server_address(url: str) -> str:
        """The base URL of a server address (host:port alone means http); ValueError with a
        one-line reason when it cannot be an http(s) server address. No I/O."""
        from specmon.runtime.monitor import Target

        return Target(url.strip()).base

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
        self.server_address(url)  # a bad URL: ValueError before anything is sent
        return session.add_target(Target(url.strip(), api_key=api_key or None)).base_url

    def remove_target(self, url: str) -> str:
        """Stop watching a server (blocking, bounded); returns its base URL."""
        session = self._session
        if session is None:
            raise RuntimeError("not connected")
        return session.remove_target(url)


class ReplayPort:
    """The replay's door to the runtime: a `runtime.replay_session.ReplaySession` made by the
    cli from a recording it read, with the header's label and the reader's notices (a torn
    line). The screen reads the view at the play head and drives the play head through it;
    nothing here does I/O."""

    def __init__(
        self, session: ReplaySession, *, label: str, notices: tuple[str, ...] = ()
    ) -> None:
        self._session = session
        self.label = label
        """The header: RECORDED, the date, server, model, draft, n_spec (and SIMULATED)."""
        self.notices = notices
        """One line each: what the reader skipped or where the recording was torn."""
        self.simulated = session.info.simulated

    def abort(self) -> None:
        """Nothing to abandon: the recording was read before the app started."""

    def close(self) -> None:
        """Nothing to stop."""

    def view(self) -> SessionView:
        """The view at the play head (moved to now first)."""
        return self._session.view()

    def position(self) -> ReplayPosition:
        """Where the play head is (as of the last `view()` or control: the view and the
        position the screen draws are of the same instant)."""
        return self._session.position()

    @property
    def timeline(self) -> ReplayTimeline:
        return self._session.timeline

    def graph_samples(self) -> tuple[ServerView | None, ...]:
        return self._session.graph_samples()

    def toggle_pause(self) -> bool:
        return self._session.toggle_pause()

    def faster(self) -> float:
        return self._session.faster()

    def slower(self) -> float:
        return self._session.slower()

    def seek(self, t: float) -> ReplayPosition:
        return self._session.seek(t)

    def seek_by(self, seconds: float) -> ReplayPosition:
        return self._session.seek_by(seconds)

    def jump(self, direction: int) -> ReplayPosition | None:
        return self._session.jump(direction)
