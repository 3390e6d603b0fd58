"""The messages between the app's process and its collector process (runtime/session.py).

Two closed sets of frozen dataclasses, one per direction: `Command` (app → collector) and
`Report` (collector → app). Each side handles its set in one `match` that ends in
`assert_never`, so mypy proves every kind is handled, as the event dispatch tables do for events
(core/dispatch.py); a message of a kind neither set holds is refused with a one-line error.

The wire is the multiprocessing pipe between a process and the child it spawned (pickle, as
before these types): nothing from outside the two processes travels on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard, get_args

from specmon.core.events import Event, SessionInfo
from specmon.runtime.monitor import Target
from specmon.sources.stream_client import ChatRequest

# --------------------------------------------------------------------------- collector → app


@dataclass(frozen=True, slots=True)
class ServerSeen:
    """What identifying one attached server found."""

    base_url: str
    models: tuple[str, ...]
    error: str | None
    context_lengths: tuple[tuple[str, int], ...] = ()
    """(model id, max_model_len) as its /v1/models cards give them (sources.server_identity)."""

    def context_length(self, model: str) -> int | None:
        """The context length the server gives for `model` (None: not given)."""
        return dict(self.context_lengths).get(model)


@dataclass(frozen=True, slots=True)
class Hello:
    """The collector started: the session's info, the servers identified, and its clock."""

    info: SessionInfo
    servers: tuple[ServerSeen, ...]
    clock_offset: float
    """time.monotonic() minus the collector's session clock (both system-wide monotonic)."""


@dataclass(frozen=True, slots=True)
class StartFailed:
    """The collector could not start (one line: what failed)."""

    error: str


@dataclass(frozen=True, slots=True)
class EventBatch:
    """The events gathered since the last batch, in arrival order."""

    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to the command numbered `token`: `value`, or `error` (one line) when it failed."""

    token: int
    value: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Stopped:
    """The collector stopped (its recording closed); the errors its hub collected."""

    errors: tuple[str, ...]


Report = Hello | StartFailed | EventBatch | Reply | Stopped
"""Every message the collector sends."""

REPORT_TYPES: tuple[type, ...] = get_args(Report)


# --------------------------------------------------------------------------- app → collector


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop: close the recording, stop the sources, say `Stopped`, exit."""


@dataclass(frozen=True, slots=True)
class Chat:
    """Stream one chat request to server number `server` (no reply: its events are the answer)."""

    request_id: str
    request: ChatRequest
    server: int


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the chat request `request_id` (nothing when it already ended)."""

    request_id: str


@dataclass(frozen=True, slots=True)
class Mark:
    """Put a user marker in the session."""

    label: str


@dataclass(frozen=True, slots=True)
class StartRecording:
    """Start recording to `path`; replies with the path, or why not."""

    token: int
    path: str


@dataclass(frozen=True, slots=True)
class StopRecording:
    """Close the recording; replies with its path (None: none was open)."""

    token: int


@dataclass(frozen=True, slots=True)
class AddTarget:
    """Watch one more server; replies with its `ServerSeen`."""

    token: int
    target: Target


@dataclass(frozen=True, slots=True)
class RemoveTarget:
    """Stop watching a server; replies with its base URL."""

    token: int
    url: str


@dataclass(frozen=True, slots=True)
class LogLine:
    """A line of the log of a server this process started (host mode), for the session."""

    source: str
    line: str


Command = (
    Stop
    | Chat
    | Cancel
    | Mark
    | LogLine
    | StartRecording
    | StopRecording
    | AddTarget
    | RemoveTarget
)
"""Every message the app sends."""

COMMAND_TYPES: tuple[type, ...] = get_args(Command)

Call = StartRecording | StopRecording | AddTarget | RemoveTarget
"""The commands that are answered by a `Reply` with their token."""


def is_report(message: object) -> TypeGuard[Report]:
    """Whether `message` is of a kind the collector sends."""
    return isinstance(message, REPORT_TYPES)


def is_command(message: object) -> TypeGuard[Command]:
    """Whether `message` is of a kind the app sends."""
    return isinstance(message, COMMAND_TYPES)


def unknown(message: object) -> str:
    """The one-line error for a message of no known kind."""
    return f"collector pipe: ignored a message of unknown kind {type(message).__name__}"
