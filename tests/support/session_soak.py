"""A long monitoring session as events, for the session state's memory checks: the short test
(tests/unit/test_session_state.py) and the 10-hour benchmark (benchmarks/session_soak.py).

Each second of session time: a /metrics scrape and a GPU sample; and, as configured, a log line
(every 10 s by default), a request (40 steps of 5 tokens), markers and a server restart (its
counters reset).
Time is the events' own `t`: no clock is read, so an hour takes a second or two to fold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tests.support.session_feed import SRC, Server, gpu_sample, request_events

from specmon.core.events import Marker, ServerLogLine
from specmon.core.session_state import SessionState


@dataclass
class Soak:
    """One session's event stream, folded into a state in stretches (`run` goes on from where
    the previous stretch stopped)."""

    request_every: int = 10
    """Seconds between two requests."""
    marker_every: float = 600
    """Seconds between two markers (0.5: two a second)."""
    log_every: int = 10
    """Seconds between two log lines (each half-way through its period)."""
    restart_every: int = 3600
    """Seconds between two server restarts (the first half-way through the first period)."""
    t: int = 0
    requests: int = 0
    events: int = 0
    server: Server = field(default_factory=lambda: Server(k=8))

    def run(self, state: SessionState, seconds: int) -> None:
        """Fold `seconds` more seconds of the session into `state`."""
        for t in range(self.t, self.t + seconds):
            if t % self.request_every == 0:
                self.requests += 1
                for e in request_events(
                    f"r{self.requests}", t + 0.1, tokens_per_step=5, steps=40, step_s=0.02
                ):
                    state.apply(e)
                    self.events += 1
                for _ in range(40):
                    self.server.step(4)
            if t % self.restart_every == self.restart_every // 2:
                self.server = Server(k=8)  # a restart: its counters start again from 0
            state.apply(self.server.scrape(float(t)))
            state.apply(gpu_sample(t + 0.5))
            self.events += 2
            if t % self.log_every == self.log_every // 2:
                state.apply(ServerLogLine(t=t + 0.6, source=SRC, line=f"INFO line {t}"))
                self.events += 1
            # the markers due in [t, t + 1): at t, t + marker_every, ... (one at t = 0)
            for n in range(
                math.ceil(t / self.marker_every), math.ceil((t + 1) / self.marker_every)
            ):
                state.apply(Marker(t=t + 0.7, label=f"m{n * self.marker_every!r}"))
                self.events += 1
        self.t += seconds
