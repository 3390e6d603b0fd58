"""Host mode's view of the vLLM server specmon started: what the startup view and the app read
(`HostWatch`, adapted by runtime/host_launch.py) and why the server is not serving
(`StartupFailed`, core/startup_log.py)."""

from __future__ import annotations

import threading
from typing import Protocol

from specmon.core.startup_log import StartupFailed, StartupProgress

__all__ = ["HostWatch", "LogSource", "StartupFailed"]


class LogSource(Protocol):
    """Where the lines come from (the cli adapts the hosted server to it)."""

    @property
    def log_path(self) -> str: ...

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        """(count of lines so far, the lines after the first `seen` of them)."""
        ...


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
