"""A recording played back under the user's control: play, pause, speed, seek, jump.

`ReplaySession` reads a recording's events in order from an `EventLog` (the cli hands it the
recording reader, sources.recording_player.RecordingReader, which reads the file a piece at a
time and can read it again from a mark; a list of events works too), folds them into a
`SessionState` up to the play head, and moves the play head on a play clock (injectable: tests
move a `FakeClock`) at `speed` recorded seconds per clock second while playing. `view()` folds
every event up to the play head and returns the state's view, the same `SessionView` the live app
reads, so the panel and the answers table are fed exactly as live.

Memory does not grow with the recording: the events are never all in memory. One streaming pass
when the session is made folds the whole recording (the view at its end, the timeline) and keeps
a sparse index: every `CHECKPOINT_EVENTS` events a compressed copy of the folded state and the
reader's mark there, at most MAX_CHECKPOINTS of them (past that, every other one is dropped and
the spacing doubles). Seeking forward folds on; seeking backward, or far forward, starts again
from the nearest kept copy before the target (or the first event) and reads the file on from its
mark (docs/replay.md has the measured times). The panel's graphs read the folded state's own
server history (`ServerView.history`, kept in the state and in its copies), so a seek shows the
graphs as they were at that moment.

The timeline (`ReplayTimeline`, core.replay_timeline, beside the play head's `ReplayPosition`:
flags, markers, counter resets, status changes, the degradation cycle's phases) comes from the
same pass: the time of every flagged request (a compact array, not the rows: the state keeps the
last rows only) and of every marker. No terminal I/O here; the UI calls everything on its own
thread.
"""

from __future__ import annotations

import bisect
import copy
import math
import pickle
import threading
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.detectors.cycle import detect_cycle
from specmon.core.events import Event, SessionInfo, StreamChunk
from specmon.core.replay_timeline import (
    PhaseSpan,
    ReplayPosition,
    ReplayTimeline,
    TickKind,
    TimelineTick,
)
from specmon.core.session_state import SessionState
from specmon.core.verdict import request_verdict
from specmon.core.views import RequestRow, SessionView

SPEEDS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""The speeds `+` and `-` step through."""
MIN_SPEED, MAX_SPEED = SPEEDS[0], SPEEDS[-1]
LEAD_IN_S = 1.0
"""Playing starts this long before the recording's first event (or at its clock's zero, if
nearer): a recording begun long after its session's clock started has no dead time first."""
CHECKPOINT_EVENTS = 20_000
"""A copy of the folded state is kept every this many events (made during the first pass), so a
backward seek folds from the nearest copy before the target, not from the first event."""
MAX_CHECKPOINTS = 64
"""At most this many copies are kept (each about 0.2 MB, compressed): in a longer recording every
other one is dropped and the spacing doubles, so memory stays bounded whatever the length."""
MAX_TIMELINE_MARKS = 10_000
"""The timeline keeps this many markers, resets and status changes with their labels (a session
has a handful); more are counted but not drawn or jumped to."""
MARK_LABEL_CHARS = 200
"""A mark's label is cut to this many characters on the timeline."""


class EventLog(Protocol):
    """Where a replay's events come from: read in order, marked between two events, and read
    again from a mark (`restart(None)`: from the first event)."""

    def __iter__(self) -> Iterator[Event]: ...

    def __next__(self) -> Event: ...

    def mark(self) -> object: ...

    def restart(self, mark: Any, /) -> None: ...


class _ListLog:
    """Events already in memory as an EventLog (tests, benchmarks); marks are indices."""

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = events
        self._i = 0

    def __iter__(self) -> _ListLog:
        return self

    def __next__(self) -> Event:
        i = self._i
        if i >= len(self._events):
            raise StopIteration
        self._i = i + 1
        return self._events[i]

    def mark(self) -> int:
        return self._i

    def restart(self, mark: int | None, /) -> None:
        self._i = 0 if mark is None else mark


def flagged(row: RequestRow) -> bool:
    """Whether a finished row is flagged (its verdict, core.verdict)."""
    return request_verdict(row).flagged


def cycle_phases(
    view: SessionView, end: float, speeds_window: int = 200
) -> tuple[tuple[PhaseSpan, ...], int | None]:
    """The degradation cycle's phases over the last requests of `view` (the view at the end of
    the recording) and its period; none when it shows no cycle (pure)."""
    phases: list[PhaseSpan] = []
    cycle = view.cycle
    if cycle is None or not cycle.detected:
        return (), None
    timed = [
        r
        for r in view.rows
        if r.outcome == "ok" and r.decode_tok_s is not None and r.t_end is not None
    ][-speeds_window:]
    report = detect_cycle([r.decode_tok_s if r.quality is None else None for r in timed])
    if report is not None:
        for row, phase in zip(timed, report.classes, strict=False):
            t1 = row.t_end if row.t_end is not None else end
            t0 = row.t_send if row.t_send is not None else t1
            phases.append(PhaseSpan(t0, t1, phase))  # type: ignore[arg-type]
    return tuple(phases), cycle.period


_MARK_KINDS: dict[str, TickKind] = {"user": "marker", "counter_reset": "reset", "status": "status"}


class _TimelineBuilder:
    """Follows the first pass's fold: the time of every flagged request and of every marker."""

    def __init__(self) -> None:
        self.flagged: dict[tuple[str, float | None], tuple[float, str]] = {}
        """Each flagged request's end and verdict, by (request id, end) (a verdict that changes
        updates it)."""
        self.marks: list[TimelineTick] = []
        self.counts: dict[TickKind, int] = {}
        self._changes = 0
        self._markers = 0

    def after(self, state: SessionState, t: float) -> None:
        """Note what the event just folded (at fold time `t`) changed: a request's verdict
        given or changed (flagged or not any more), markers."""
        changed = state.verdict_changes_made - self._changes
        if changed:
            self._changes = state.verdict_changes_made
            for change in state.newest_verdict_changes(changed):
                key = (change.request_id, change.t)
                if change.flagged:
                    words = f"{change.kind.replace('-', ' ')}: {change.request_id}"
                    self.flagged[key] = (change.t if change.t is not None else t, words)
                else:
                    self.flagged.pop(key, None)
        added = state.markers_added - self._markers
        if added:
            self._markers = state.markers_added
            for marker in state.newest_markers(added):
                kind = _MARK_KINDS[marker.kind]
                self.counts[kind] = self.counts.get(kind, 0) + 1
                if len(self.marks) < MAX_TIMELINE_MARKS:
                    self.marks.append(TimelineTick(t, kind, marker.label[:MARK_LABEL_CHARS]))

    def timeline(self, view: SessionView, start: float, end: float) -> ReplayTimeline:
        phases, period = cycle_phases(view, end)
        ordered = sorted(self.flagged.values())
        flags = array("d", (t for t, _ in ordered))
        jumps = array("d", sorted({*flags, *(m.t for m in self.marks)}))
        counts = dict(self.counts)
        if flags:
            counts["flag"] = len(flags)
        return ReplayTimeline(
            start,
            end,
            flags,
            tuple(self.marks),
            phases,
            period,
            counts,
            jumps,
            tuple(words for _, words in ordered),
        )


@dataclass(frozen=True, slots=True, eq=False)
class _Checkpoint:
    """A kept copy of the folded state after `count` events (the fold's time then `t`) and the
    log's mark there."""

    count: int
    t: float
    mark: object
    state: bytes | SessionState
    """The state pickled and compressed (a copy when it cannot be pickled)."""


def _freeze(state: SessionState) -> bytes | SessionState:
    try:
        return zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(state)  # something in it cannot be pickled: a plain copy


def _thaw(frozen: bytes | SessionState) -> SessionState:
    if isinstance(frozen, bytes):
        state: SessionState = pickle.loads(zlib.decompress(frozen))  # our own bytes
        return state
    return copy.deepcopy(frozen)


class ReplaySession:
    """Plays a recording's events into a fresh SessionState under user control (see module doc).

    `events` is an EventLog (the recording reader) or a sequence of events. `make_state()` makes
    an empty state (called again for a seek back before the first checkpoint); `clock` is the
    play clock; `speed` is clamped to MIN_SPEED..MAX_SPEED; `playing=False` starts paused.
    """

    def __init__(
        self,
        info: SessionInfo,
        events: Sequence[Event] | EventLog,
        make_state: Callable[[], SessionState],
        *,
        clock: Clock = monotonic_clock,
        speed: float = 1.0,
        playing: bool = True,
        checkpoint_events: int = CHECKPOINT_EVENTS,
        max_checkpoints: int = MAX_CHECKPOINTS,
    ) -> None:
        self.info = info
        self._log: EventLog = _ListLog(events) if isinstance(events, Sequence) else events
        self._make_state = make_state
        self._clock = clock
        self._lock = threading.RLock()
        self._checkpoints: list[_Checkpoint] = []
        """(events folded, the fold's time, the log's mark, the state), sparse (module doc)."""
        first, last, total, whole, builder = self._first_pass(
            checkpoint_events, max(2, max_checkpoints)
        )
        self._total = total
        self.origin = min(0.0, first) if total else 0.0
        """The recording's clock zero (the times shown count from it)."""
        self.start = max(self.origin, first - LEAD_IN_S) if total else 0.0
        """Where playing starts: LEAD_IN_S before the first event, not at the clock's zero (a
        recording begun with F5 has its first event at 37 s: no 37 s of dead time first)."""
        self.end = last if total else 0.0
        self.final_view = whole.view()
        """The view at the end of the recording (what `--json` prints)."""
        self.timeline = builder.timeline(self.final_view, self.start, self.end)
        self._speed = clamp_speed(speed)
        self._playing = playing and self.end > self.start
        self._anchor_t = self.start
        self._anchor_wall = clock()
        self._state = make_state()
        self._pos = 0
        self._tmax: float | None = None
        """The fold's time: the latest event time folded (an event stamped earlier than one
        before it is due with the one before it)."""
        self._next: Event | None = None
        """The next event, read but not folded yet."""
        self._head = self.start
        self._view: SessionView | None = None
        self._view_pos = -1
        self.rebuilds = 0
        """How many times the state was rebuilt from the first event (backward seeks)."""
        self._log.restart(None)

    def _first_pass(
        self, every: int, most: int
    ) -> tuple[float, float, int, SessionState, _TimelineBuilder]:
        """Fold the whole recording once: its first and last (fold) times, its event count, the
        state at its end and the timeline's points; keeps the checkpoints."""
        whole = self._make_state()
        builder = _TimelineBuilder()
        log, kept = self._log, self._checkpoints
        count = 0
        first = tmax = 0.0
        after = builder.after
        for event in log:
            t = event.t
            if count == 0:
                first = tmax = t
            elif t > tmax:
                tmax = t
            whole.apply(event)
            count += 1
            if type(event) is not StreamChunk:  # a chunk neither ends a request nor marks
                after(whole, tmax)
            if count % every == 0:
                kept.append(_Checkpoint(count, tmax, log.mark(), _freeze(whole)))
                if len(kept) >= most:  # keep every other one: the spacing doubles
                    kept[:] = kept[1::2]
                    every *= 2
        return first, tmax, count, whole, builder

    def close(self) -> None:
        """Close the log (the recording file) when it can be closed."""
        close = getattr(self._log, "close", None)
        if close is not None:
            close()

    @property
    def events_total(self) -> int:
        return self._total

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
        """Apply every event due at or before `t` (read from the log as needed)."""
        state, log, total = self._state, self._log, self._total
        tmax = self._tmax
        pos = self._pos
        event = self._next
        while pos < total:
            if event is None:
                try:
                    event = next(log)
                except StopIteration:  # the file changed since the first pass: stop there
                    break
            due = event.t if tmax is None or event.t > tmax else tmax
            if due > t:
                break
            state.apply(event)
            tmax = due
            pos += 1
            event = None
        self._next = event
        self._tmax = tmax
        self._pos = pos
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
            events_total=self._total,
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
        if t < self._head or (checkpoint is not None and checkpoint.count > self._pos):
            self._restore(checkpoint)
        self._fold_to(t)
        self._reanchor(t)

    def _checkpoint_before(self, t: float) -> _Checkpoint | None:
        """The latest checkpoint at or before `t`, if any (its copy of the state holds the
        servers' history, so the graphs need no earlier events)."""
        for checkpoint in reversed(self._checkpoints):
            if checkpoint.t <= t:
                return checkpoint
        return None

    def _restore(self, checkpoint: _Checkpoint | None) -> None:
        """Start again from `checkpoint` (a seek far forward, or back): a copy of its state, the
        log read on from its mark; else from an empty state and the first event."""
        self._view = None
        self._next = None
        if checkpoint is not None:
            self._state = _thaw(checkpoint.state)
            self._pos = checkpoint.count
            self._head = self._tmax = checkpoint.t
            self._log.restart(checkpoint.mark)
            return
        self.rebuilds += 1
        self._state = self._make_state()
        self._pos = 0
        self._tmax = None
        self._head = self.start
        self._log.restart(None)

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
            target: float | None = None
            if direction > 0:
                i = bisect.bisect_right(jumps, here + 1e-6)
                target = jumps[i] if i < len(jumps) else None
            else:
                i = bisect.bisect_left(jumps, here - slack)
                target = jumps[i - 1] if i > 0 else None
            if target is None:
                return None
            return self.seek(target)

    def labels_here(self) -> tuple[str, ...]:
        """What the timeline has at the play head: each mark's label, and each flagged request
        that ended there with its verdict (`vanilla speed: ID`, `transition: ID`, ...)."""
        with self._lock:
            t = self._head
            tl = self.timeline
            times = [m.t for m in tl.marks]
            lo, hi = bisect.bisect_left(times, t - 1e-9), bisect.bisect_right(times, t + 1e-9)
            out = [m.label for m in tl.marks[lo:hi]]
            i = bisect.bisect_left(tl.flags, t - 1e-9)
            j = bisect.bisect_right(tl.flags, t + 1e-9)
            out.extend(tl.flag_labels[i:j] if len(tl.flag_labels) == len(tl.flags) else ())
            return tuple(out)


def clamp_speed(speed: float) -> float:
    """`speed` within MIN_SPEED..MAX_SPEED (a NaN or non-positive speed is 1)."""
    if not math.isfinite(speed) or speed <= 0:
        return 1.0
    return min(MAX_SPEED, max(MIN_SPEED, speed))
