"""What the replay screen draws of a recording, as plain values: the play head
(`ReplayPosition`) and the recording at a glance (`ReplayTimeline`: flags, markers, counter
resets, status changes, the degradation cycle's phases). Made by the runtime's replay engine
(runtime.replay_session), read by the ui's replay screen and timeline widget. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

TickKind = Literal["flag", "marker", "reset", "status"]
PhaseKind = Literal["fast", "transition", "degraded", "recovery"]


@dataclass(frozen=True, slots=True)
class TimelineTick:
    """One labelled point of the timeline: a user marker, a counter reset (server restart) or a
    server status change (flags are kept as times only: `ReplayTimeline.flags`)."""

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


@dataclass(frozen=True, slots=True, eq=False)
class ReplayTimeline:
    """The whole recording at a glance: its span and what happened where."""

    start: float
    end: float
    flags: Sequence[float]
    """Where every flagged request of the recording appears (its end), in order: its verdict
    (core.verdict: loop, garbled, transition or vanilla-speed) as the session state settles it,
    the one every screen counts. A compact array of times."""
    marks: tuple[TimelineTick, ...]
    """Markers, counter resets and status changes, in order (the first MAX_TIMELINE_MARKS of
    runtime.replay_session)."""
    phases: tuple[PhaseSpan, ...]
    """Empty when the whole recording shows no cycle."""
    cycle_period: int | None
    counts: Mapping[TickKind, int]
    """How many of each kind the whole recording holds."""
    jumps: Sequence[float]
    """Where `n`/`N` go: every flag's and mark's time, sorted, without repeats."""
    flag_labels: tuple[str, ...] = ()
    """Each flag's words, in the order of `flags`: "vanilla speed: r7", "transition: r6",
    "loop: r5", "garbled: r7" (its verdict at the end of the recording)."""

    def count(self, kind: TickKind) -> int:
        return self.counts.get(kind, 0)


@dataclass(frozen=True, slots=True)
class ReplayPosition:
    """Where the play head is and how it moves."""

    t: float
    start: float
    """Where playing starts: just before the recording's first event (LEAD_IN_S of
    runtime.replay_session), not at its clock's zero."""
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
