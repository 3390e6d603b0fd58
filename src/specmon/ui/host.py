"""Host mode's view of the vLLM server specmon started: what the startup view and the app read
(`HostWatch`, adapted by the cli) and why the server is not serving (`StartupFailed`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from specmon.core.startup_log import StartupProgress


class LogSource(Protocol):
    """Where the lines come from (the cli adapts the hosted server to it)."""

    @property
    def log_path(self) -> str: ...

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        """(count of lines so far, the lines after the first `seen` of them)."""
        ...


@dataclass(frozen=True, slots=True)
class StartupFailed:
    """Why the hosted server is not (or no longer) serving: the reason, the last log lines and
    the recognised cause (None when not recognised). All log text is untrusted."""

    reason: str
    tail: tuple[str, ...]
    log_path: str
    cause: str | None = None
    hint: str | None = None
    seen_in: str | None = None
    after_ready: bool = False
    """True when the server stopped while serving (not during the start)."""


class HostWatch(LogSource, Protocol):
    """What the startup view needs of the hosted server."""

    @property
    def base_url(self) -> str: ...

    @property
    def title(self) -> str:
        """What is being started, e.g. the model and the method, for the heading."""
        ...

    @property
    def exit_on_failure(self) -> bool:
        """True when no one can read the failure view (not on a terminal): the app ends at once
        on a failure instead of waiting for the user to quit."""
        ...

    def progress(self) -> StartupProgress: ...

    def elapsed_s(self) -> float:
        """Seconds since launch."""
        ...

    def wait_ready(self, cancel: threading.Event) -> StartupFailed | None:
        """Block until /health answers 200 (None) or the start failed; returns early (with a
        failure) once `cancel` is set."""
        ...

    def exit_failure(self) -> StartupFailed | None:
        """After the start: None while the server runs, else why it stopped."""
        ...
