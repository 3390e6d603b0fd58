"""Generated recordings: a sample recording repeated end to end, written by specmon's Recorder
(request ids renamed and times shifted per copy; the counters start again in every copy)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from specmon.core.clock import FakeClock
from specmon.core.events import RequestEnded, RequestStarted, SessionInfo, StreamChunk
from specmon.runtime.recorder import Recorder
from specmon.sources.recording_player import read_recording

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


def repeated_recording(path: Path, events: int, sample: str = "demo-cycle") -> int:
    """Write `sample` repeated until at least `events` events are written (whole copies); the
    number of copies."""
    base = read_recording(RECORDINGS / f"{sample}.ndjson.gz")
    span = max(e.t for e in base.events) + 1.0
    recorder = Recorder(path, base.info, clock=FakeClock(), flush_interval=1e9)
    written = copies = 0
    try:
        while written < events:
            for e in base.events:
                changes: dict[str, object] = {"t": e.t + copies * span}
                rid = getattr(e, "request_id", None)
                if rid is not None:
                    changes["request_id"] = f"{rid}-{copies}"
                recorder.write(dataclasses.replace(e, **changes))  # type: ignore[type-var]
            written += len(base.events)
            copies += 1
    finally:
        recorder.close()
    return copies


def cycling_recording(path: Path, requests: int, *, chunks: int = 40, slow_every: int = 4) -> int:
    """A recording of `requests` answers one after the other, `chunks` chunks each, on a
    simulated server with n_spec 4 (no /metrics, cheap to fold: chunks and ends only): three
    fast answers (3 tokens a chunk: AL 3, 300 tok/s), then one at vanilla speed (1 token a chunk:
    AL 1, 100 tok/s), again and again (every `slow_every`-th is slow). Returns how many are
    slow."""
    info = SessionInfo(server="http://sim", model="m", n_spec=4, simulated=True)
    recorder = Recorder(path, info, clock=FakeClock(), flush_interval=1e9)
    t = 0.0
    slow = 0
    try:
        for i in range(requests):
            rid = f"r{i}"
            per_chunk = 1 if i % slow_every == slow_every - 1 else 3
            slow += per_chunk == 1
            recorder.write(RequestStarted(t, rid, "http://sim", "m", max_tokens=chunks * 3))
            t += 0.05
            for k in range(1, chunks + 1):
                recorder.write(
                    StreamChunk(t, rid, text="w " * per_chunk, completion_tokens=k * per_chunk)
                )
                t += 0.01
            recorder.write(
                RequestEnded(
                    t,
                    rid,
                    prompt_tokens=8,
                    completion_tokens=chunks * per_chunk,
                    finish_reason="length",
                )
            )
            t += 0.1
    finally:
        recorder.close()
    return slow
