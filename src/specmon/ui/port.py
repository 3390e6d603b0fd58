"""What the chat and dashboard screens need of the runtime (`SessionPort`, a Protocol: the real
one is `live_port.LivePort`, tests give a fake), and the values that cross it: a question
(`Ask`), what is known of the server (`ServerSummary`) and the outcome of connecting
(`Connection`). Nothing here imports textual or starts I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from specmon.core.views import SessionView
from specmon.ui.answer_feed import AnswerFeed
from specmon.ui.answer_numbers import AnswerNumbers


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
    retryable: bool = True
    """Whether trying again later can help (False: a model the server does not serve)."""


class SessionPort(Protocol):
    """The app's one door to a live session (`specmon chat`, `demo`, `watch`). Blocking methods
    (connect, recording, targets) run off the UI thread; the others only read."""

    @property
    def server(self) -> ServerSummary | None:
        """The server connected to (None before a connection)."""
        ...

    @property
    def connected(self) -> bool: ...

    @property
    def models(self) -> tuple[str, ...]:
        """The models the connected server lists (its /v1/models, as the collector identified
        it; untrusted names); empty before a connection."""
        ...

    def use_model(self, model: str) -> ServerSummary:
        """Ask the next questions of `model`, one the server lists: returns the server summary
        with it (and its context length). ValueError, one line, when no server is connected or
        it does not list `model`."""
        ...

    def connect(self) -> Connection:
        """Start a session and identify the server (blocking); may be called again (retry)."""
        ...

    def abort(self) -> None:
        """The app is ending: abandon a connection still being made (blocking for a moment)."""
        ...

    def close(self) -> None:
        """Stop the session (cancels any answer, closes the recording)."""
        ...

    def ask(self, ask: Ask) -> AnswerFeed:
        """Start streaming one answer; returns its feed at once."""
        ...

    def view(self) -> SessionView | None:
        """The session's latest published view, or None when not connected."""
        ...

    def numbers(self, feed: AnswerFeed) -> AnswerNumbers:
        """An answer's numbers, from the session's view of its request (its finished row, else
        its in-flight row; all None before the view has one)."""
        ...

    def quiet_note(self, feed: AnswerFeed) -> str | None:
        """While an answer waits for data: for how long, and when it gives up; else None."""
        ...

    def now(self) -> float:
        """The session clock (the clock of every arrival time), in seconds."""
        ...

    @property
    def recording(self) -> str | None:
        """Where the session is being recorded (None: not recording)."""
        ...

    def start_recording(self, path: str) -> str: ...

    def stop_recording(self) -> str | None: ...

    def mark(self, label: str) -> None: ...

    def add_target(self, url: str, *, api_key: str | None = None) -> str:
        """Watch one more server (blocking); returns its base URL."""
        ...

    def remove_target(self, url: str) -> str:
        """Stop watching a server (blocking); returns its base URL."""
        ...


def server_address(url: str) -> str:
    """The base URL of a server address (host:port alone means http); ValueError with a
    one-line reason when it cannot be an http(s) server address. No I/O."""
    from specmon.runtime.monitor import Target

    return Target(url.strip()).base
