"""A recording played back under the user's control: play, pause, speed, seek, jump.

`ReplaySession` owns a recording's decoded events (read by the cli through the recording
player), a `SessionState` folded up to the play head, and a play clock (injectable: tests move a
`FakeClock`). The play head moves at `speed` recorded seconds per clock second while playing.
`view()` folds every event up to the play head and returns the state's view, the same
`SessionView` the live app reads, so the panel and the answers table are fed exactly as live.

Seeking forward folds on; seeking backward rebuilds the state up to the target from the first
event, or in a long recording from the nearest kept copy of the state (`CHECKPOINT_EVENTS`) at
before it (docs/replay.md has the measured times). The panel's graphs read the folded state's
own server history (`ServerView.history`, kept in the state and in its copies), so a seek shows
the graphs as they were at that moment.

The timeline (`ReplayTimeline`: flags, markers, counter resets, the degradation cycle's phases)
comes from one fold of the whole recording when the session is made. No I/O here: the events
come in decoded; the UI calls everything on its own thread.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.detectors.cycle import detect_cycle
from specmon.core.events import Event, SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import RequestRow, SessionView

SPEEDS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""The speeds `+` and `-` step through."""
MIN_SPEED, MAX_SPEED = SPEEDS[0], SPEEDS[-1]
LEAD_IN_S = 1.0
"""Playing starts this long before the recording's first event (or at its clock's zero, if
nearer): a recording begun long after its session's clock started has no dead time first."""
CHECKPOINT_EVENTS = 20_000
"""A copy of the folded state is kept every this many events (made during the fold for the
timeline), so a backward seek in a long recording folds from the nearest copy before the target,
not from the first event (docs/replay.md has the measured times)."""

TickKind = Literal["flag", "marker", "reset", "status"]
PhaseKind = Literal["fast", "transition", "degraded", "recovery"]


@dataclass(frozen=True, slots=True)
class TimelineTick:
    """One point of the timeline: a vanilla-speed request (at its end, when the flag appears),
    a user marker, a counter reset (server restart) or a server status change."""

    t: float
    kind: TickKind
    label: str


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """One request of a detected degradation cycle, from its send to its end, with the cycle
    detector's class for it."""

    t0: float
    t1: float
    phase: PhaseKind


@dataclass(frozen=True, slots=True)
class ReplayTimeline:
    """The whole recording at a glance: its span and what happened where."""

    start: float
    end: float
    ticks: tuple[TimelineTick, ...]
    phases: tuple[PhaseSpan, ...]
    """Empty when the whole recording shows no cycle."""
    cycle_period: int | None

    @property
    def jumps(self) -> tuple[float, ...]:
        """Where `n`/`N` go: every tick's time, sorted, without repeats."""
        return tuple(sorted({tick.t for tick in self.ticks}))


@dataclass(frozen=True, slots=True)
class ReplayPosition:
    """Where the play head is and how it moves."""

    t: float
    start: float
    """Where playing starts: just before the recording's first event (LEAD_IN_S), not at its
    clock's zero."""
    end: float
    playing: bool
    speed: float
    at_end: bool
    events_applied: int
    events_total: int
    origin: float = 0.0
    """The recording's clock zero (when recording began): the times shown count from it, so the
    header keeps the recorded clock even though the play head starts at the first event."""

    @property
    def elapsed_s(self) -> float:
        """The play head's recorded time, from the recording's clock zero."""
        return self.t - self.origin

    @property
    def total_s(self) -> float:
        """The recording's last event's time, from its clock zero."""
        return self.end - self.origin


def _flagged(row: RequestRow) -> bool:
    if row.outcome != "ok":
        return False
    if row.speed_class is not None:
        return row.speed_class.kind == "vanilla-speed"
    return row.vanilla is not None and row.vanilla.flagged


def build_timeline(
    view: SessionView, start: float, end: float, speeds_window: int = 200
) -> ReplayTimeline:
    """The timeline of a whole recording from the view at its end (pure)."""
    ticks: list[TimelineTick] = []
    for row in view.rows:
        if _flagged(row) and row.t_end is not None:
            ticks.append(TimelineTick(row.t_end, "flag", f"vanilla speed: {row.request_id}"))
    kinds: dict[str, TickKind] = {"user": "marker", "counter_reset": "reset", "status": "status"}
    for marker in view.markers:
        kind = kinds[marker.kind]
        ticks.append(TimelineTick(marker.t, kind, marker.label))
    ticks.sort(key=lambda tick: tick.t)
    phases: list[PhaseSpan] = []
    period: int | None = None
    cycle = view.cycle
    if cycle is not None and cycle.detected:
        period = cycle.period
        timed = [
            r
            for r in view.rows
            if r.outcome == "ok" and r.decode_tok_s is not None and r.t_end is not None
        ][-speeds_window:]
        report = detect_cycle([r.decode_tok_s for r in timed if r.decode_tok_s is not None])
        if report is not None:
            for row, phase in zip(timed, report.classes, strict=False):
                t1 = row.t_end if row.t_end is not None else end
                t0 = row.t_send if row.t_send is not None else t1
                phases.append(PhaseSpan(t0, t1, phase))  # type: ignore[arg-type]
    return ReplayTimeline(start, end, tuple(ticks), tuple(phases), period)


class ReplaySession:
    """Plays decoded events into a fresh SessionState under user control (see module doc).

    `make_state()` makes an empty state (called again for every backward seek); `clock` is the
    play clock; `speed` is clamped to MIN_SPEED..MAX_SPEED; `playing=False` starts paused.
    """

    def __init__(
        self,
        info: SessionInfo,
        events: Sequence[Event],
        make_state: Callable[[], SessionState],
        *,
        clock: Clock = monotonic_clock,
        speed: float = 1.0,
        playing: bool = True,
        checkpoint_events: int = CHECKPOINT_EVENTS,
    ) -> None:
        self.info = info
        # Events are folded in file order (the live fold's order); an event stamped earlier
        # than one before it (a log line queued, then emitted) is due with the one before it.
        self._events = list(events)
        self._times = list(itertools.accumulate((e.t for e in self._events), max))
        self._make_state = make_state
        self._clock = clock
        self._lock = threading.RLock()
        self.origin = min(0.0, self._times[0]) if self._times else 0.0
        """The recording's clock zero (the times shown count from it)."""
        self.start = max(self.origin, self._times[0] - LEAD_IN_S) if self._times else 0.0
        """Where playing starts: LEAD_IN_S before the first event, not at the clock's zero (a
        recording begun with F5 has its first event at 37 s: no 37 s of dead time first)."""
        self.end = self._times[-1] if self._times else 0.0
        self._speed = clamp_speed(speed)
        self._playing = playing and self.end > self.start
        self._anchor_t = self.start
        self._anchor_wall = clock()
        self._state = make_state()
        self._pos = 0
        self._head = self.start
        self._view: SessionView | None = None
        self._view_pos = -1
        self.rebuilds = 0
        """How many times the state was rebuilt from the first event (backward seeks)."""
        self._checkpoints: list[tuple[int, SessionState]] = []
        """(events folded, a copy of the state after them), every `checkpoint_events`."""
        whole = make_state()
        for i, event in enumerate(self._events):
            if i and i % checkpoint_events == 0:
                self._checkpoints.append((i, copy.deepcopy(whole)))
            whole.apply(event)
        self.final_view = whole.view()
        """The view at the end of the recording (what `--json` prints)."""
        self.timeline = build_timeline(self.final_view, self.start, self.end)

    # ------------------------------------------------------------ the play head

    def _now_t(self) -> float:
        if not self._playing:
            return self._anchor_t
        t = self._anchor_t + (self._clock() - self._anchor_wall) * self._speed
        return min(self.end, t)

    def _reanchor(self, t: float) -> None:
        self._anchor_t = t
        self._anchor_wall = self._clock()

    def _fold_to(self, t: float) -> None:
        """Apply every event at or before `t`."""
        events, state = self._events, self._state
        stop = bisect.bisect_right(self._times, t)
        for i in range(self._pos, stop):
            state.apply(events[i])
        self._pos = max(self._pos, stop)
        self._head = t

    def advance(self) -> ReplayPosition:
        """Move the play head to now (playing) and fold up to it; returns where it is."""
        with self._lock:
            t = self._now_t()
            if t >= self._head:
                self._fold_to(t)
            if self._playing and t >= self.end:
                self._playing = False
                self._reanchor(self.end)
            return self._position()

    def _position(self) -> ReplayPosition:
        return ReplayPosition(
            t=self._head,
            start=self.start,
            end=self.end,
            playing=self._playing,
            speed=self._speed,
            at_end=self._head >= self.end,
            events_applied=self._pos,
            events_total=len(self._events),
            origin=self.origin,
        )

    def position(self) -> ReplayPosition:
        with self._lock:
            return self._position()

    def view(self) -> SessionView:
        """The session's view at the play head (advanced to now first)."""
        with self._lock:
            self.advance()
            if self._view is None or self._view_pos != self._pos:
                self._view = self._state.view()
                self._view_pos = self._pos
            return self._view

    def toggle_pause(self) -> bool:
        """Pause or resume; resuming at the end starts again from the beginning. Returns
        whether it plays now."""
        with self._lock:
            self.advance()
            if self._playing:
                self._playing = False
                self._reanchor(self._head)
            else:
                if self._head >= self.end:
                    self._seek(self.start)
                self._playing = self.end > self.start
                self._reanchor(self._head)
            return self._playing

    @property
    def speed(self) -> float:
        return self._speed

    def set_speed(self, speed: float) -> float:
        with self._lock:
            self.advance()
            self._speed = clamp_speed(speed)
            self._reanchor(self._head)
            return self._speed

    def faster(self) -> float:
        """The next speed up the ladder (x64 at most)."""
        up = [s for s in SPEEDS if s > self._speed + 1e-9]
        return self.set_speed(up[0] if up else MAX_SPEED)

    def slower(self) -> float:
        """The next speed down the ladder (x0.5 at least)."""
        down = [s for s in SPEEDS if s < self._speed - 1e-9]
        return self.set_speed(down[-1] if down else MIN_SPEED)

    def seek(self, t: float) -> ReplayPosition:
        """Put the play head at recorded time `t` (clamped to the recording's span)."""
        with self._lock:
            self._seek(t)
            return self._position()

    def _seek(self, t: float) -> None:
        t = min(self.end, max(self.start, t))
        checkpoint = self._checkpoint_before(t)
        if t < self._head or (checkpoint is not None and checkpoint[0] > self._pos):
            self._restore(t, checkpoint)
        self._fold_to(t)
        self._reanchor(t)

    def _checkpoint_before(self, t: float) -> tuple[int, SessionState] | None:
        """The latest checkpoint at or before `t`, if any (its copy of the state holds the
        servers' history, so the graphs need no earlier events)."""
        for index, state in reversed(self._checkpoints):
            if self._times[index - 1] <= t:
                return index, state
        return None

    def _restore(self, t: float, checkpoint: tuple[int, SessionState] | None) -> None:
        """Start again from a copy of `checkpoint` (a seek far forward, or back), else from an
        empty state (a seek back to before the first checkpoint)."""
        self._view = None
        if checkpoint is not None:
            index, state = checkpoint
            head = self._times[index - 1]
            self._state = copy.deepcopy(state)
            self._pos = index
            self._head = head
            return
        self.rebuilds += 1
        self._state = self._make_state()
        self._pos = 0
        self._head = self.start

    def seek_by(self, seconds: float) -> ReplayPosition:
        """Move the play head by `seconds` (negative: back)."""
        with self._lock:
            self.advance()
            return self.seek(self._head + seconds)

    def jump(self, direction: int) -> ReplayPosition | None:
        """Go to the next (direction > 0) or previous flag, marker or reset; None when there is
        none that way (the play head stays)."""
        with self._lock:
            here = self.advance().t
            jumps = self.timeline.jumps
            # Going back skips a point the head has only just passed (a playing head moves on
            # between two key presses), so pressing N twice goes back twice.
            slack = 1e-6 if not self._playing else max(0.25, 0.5 * self._speed)
            if direction > 0:
                later = [t for t in jumps if t > here + 1e-6]
                target = later[0] if later else None
            else:
                earlier = [t for t in jumps if t < here - slack]
                target = earlier[-1] if earlier else None
            if target is None:
                return None
            return self.seek(target)


def clamp_speed(speed: float) -> float:
    """`speed` within MIN_SPEED..MAX_SPEED (a NaN or non-positive speed is 1)."""
    if not math.isfinite(speed) or speed <= 0:
        return 1.0
    return min(MAX_SPEED, max(MIN_SPEED, speed))
