"""What the replay screen's engine costs (runtime/replay_session.py), on the sample recordings and
on a long synthetic one, read from the file as the replay screen reads it (the recording reader:
the events are streamed, never all in memory).

- open: opening the recording and making the ReplaySession (which folds the whole recording once
  as it reads it, for the timeline, keeping compressed copies of the state and the reader's marks);
- seek back: from the end to the middle, which rebuilds the state from the first event (the
  costliest key press), the median of interleaved rounds;
- seek end: from the start to the end (a forward fold with the graph samples of the last minute);
- play x64: the screen's work per recorded minute at the fastest speed: ticks of 0.1 s of the
  play clock (6.4 recorded seconds each) with `view()` and the graph samples read each tick, as
  ReplayScreen.refresh_all does; reported per second of wall time the screen spends on it.

The long recording is demo-cycle repeated end to end (request ids renamed, times shifted) to about
`--minutes` minutes, written to a temporary .ndjson.gz by the Recorder; every repetition starts
the counters again, so it also holds a counter reset per copy (more markers than a real session,
which only makes the fold dearer).

    PYTHONPATH=src python3 benchmarks/replay_seek.py [--minutes 60] [--rounds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from specmon.core.clock import FakeClock
from specmon.core.events import Event
from specmon.core.session_state import SessionState
from specmon.runtime.recorder import Recorder
from specmon.runtime.replay_session import ReplaySession
from specmon.sources.recording_player import RecordingReader, read_recording

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("demo-cycle", "healthy", "restart")


def _median_s(run: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _repeated(events: Sequence[Event], minutes: float) -> list[Event]:
    span = max(e.t for e in events) + 1.0
    copies = max(1, int(minutes * 60 // span))
    out: list[Event] = []
    for k in range(copies):
        for e in events:
            changes: dict[str, object] = {"t": e.t + k * span}
            rid = getattr(e, "request_id", None)
            if rid is not None:
                changes["request_id"] = f"{rid}-{k}"
            out.append(dataclasses.replace(e, **changes))  # type: ignore[type-var]
    return out


def measure(name: str, path: Path, rounds: int) -> str:
    clock = FakeClock()
    t0 = time.perf_counter()
    reader = RecordingReader(path)
    info = reader.info
    session = ReplaySession(info, reader, lambda: SessionState(info), clock=clock, playing=False)
    open_s = time.perf_counter() - t0

    def seek_back() -> None:
        session.seek(session.end)
        t = time.perf_counter()
        session.seek(session.end / 2)
        session.view()
        seek_back.last = time.perf_counter() - t  # type: ignore[attr-defined]

    backs = []
    for _ in range(rounds):
        seek_back()
        backs.append(seek_back.last)  # type: ignore[attr-defined]
    back_s = statistics.median(backs)

    def seek_end() -> None:
        session.seek(session.start)
        session.seek(session.end)
        session.view()

    end_s = _median_s(seek_end, rounds)

    # play x64 for one recorded minute (or the whole recording when shorter)
    session.seek(session.start)
    session.set_speed(64.0)
    session.toggle_pause()
    minute = min(60.0, session.end - session.start)
    ticks = max(1, round(minute / 64.0 / 0.1))
    t = time.perf_counter()
    for _ in range(ticks):
        clock.advance(0.1)
        session.view()
    play_s = time.perf_counter() - t
    wall_s = ticks * 0.1
    reader.close()
    return (
        f"| {name} | {session.events_total:,} | {session.end - session.start:,.0f} s | "
        f"{open_s * 1000:.0f} ms | {back_s * 1000:.1f} ms | {end_s * 1000:.1f} ms | "
        f"{play_s / wall_s:.1%} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(
        "| recording | events | span | open | seek back (rebuild) | seek to end "
        "| play x64 (share of a core) |"
    )
    print("|---|---|---|---|---|---|---|")
    for sample in SAMPLES:
        print(measure(sample, ROOT / "recordings" / f"{sample}.ndjson.gz", args.rounds))
    base = read_recording(ROOT / "recordings" / "demo-cycle.ndjson.gz")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.ndjson.gz"
        recorder = Recorder(path, base.info, clock=FakeClock(), flush_interval=1e9)
        for event in _repeated(base.events, args.minutes):
            recorder.write(event)
        recorder.close()
        print(measure(f"demo-cycle x{args.minutes:g} min", path, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
