"""Recording I/O cost: the recorder against a bare json.dumps-and-write loop, the reader against a
bare json.loads loop, on the same realistic session (goal: both within 1.5x).

The session: 40 requests of 256 streamed chunks each (text, cumulative token counts), a /metrics
scrape per second with ~150 series of which ~20 change, and a GPU sample per second. The bare write
loop dumps the very values the recorder stores (so the ratio is the recorder's own overhead:
encoding events, /metrics deltas, secret scrubbing, flush checks); the bare read loop parses the
same file's lines without building events.

Run: python benchmarks/recording_io.py [--repeat N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from specmon.core.clock import FakeClock
from specmon.core.events import (
    GpuReading,
    GpuSampled,
    MetricSample,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    SessionInfo,
    StreamChunk,
    labels_of,
)
from specmon.core.recording_format import EventEncoder
from specmon.runtime.recorder import Recorder
from specmon.sources.recording_player import read_recording

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "speculative",
    "decoding",
    "drafts",
]


def make_session() -> list:
    events: list = []
    t = 0.0
    scrape_n = 0
    for r in range(40):
        rid = f"r{r}"
        events.append(RequestStarted(t, rid, "http://127.0.0.1:8000", "model", 1024, 0.0, 1.0, 900))
        n = 0
        for c in range(256):
            t += 0.02
            n += 1 + (c % 4)
            text = " ".join(WORDS[(c + k) % len(WORDS)] for k in range(1 + c % 4))
            events.append(StreamChunk(t, rid, text, "", None, n, 256))
            if int(t) > scrape_n:
                scrape_n = int(t)
                events.append(_scrape(t, scrape_n))
                events.append(_gpu(t, scrape_n))
        events.append(RequestEnded(t, rid, "ok", 256, n, "length"))
    return events


def _scrape(t: float, k: int) -> MetricsScraped:
    samples = []
    for i in range(130):  # histogram buckets etc.: mostly unchanged between scrapes
        labels = labels_of({"engine": "0", "model_name": "model", "le": str(i)})
        samples.append(MetricSample("vllm:e2e_request_latency_seconds_bucket", labels, float(i)))
    base = labels_of({"engine": "0", "model_name": "model"})
    for i in range(20):  # counters that move every second
        samples.append(MetricSample(f"vllm:counter_{i}_total", base, float(k * (i + 1))))
    return MetricsScraped(t, "http://127.0.0.1:8000", tuple(samples))


def _gpu(t: float, k: int) -> GpuSampled:
    g = GpuReading(0, "GPU", None, 60.0 + k % 5, 90.0, 10 << 30, 24 << 30, 97.0, 300.0, 450.0)
    return GpuSampled(t, "gpu", (g,))


def _open(path: Path, mode: str):
    """The file, through gzip (at the recorder's level, 6) when its name ends in .gz."""
    if path.name.endswith(".gz"):
        return gzip.open(path, mode, compresslevel=6)
    return open(path, mode)


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired(ours, bare, repeat: int) -> tuple[float, float, float]:
    """Interleaved rounds (ours, bare, ours, bare, ...): medians of both and of the per-round
    ratio, so load from other processes hits both sides alike."""
    a, b = [], []
    for _ in range(repeat):
        a.append(_time(ours))
        b.append(_time(bare))
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    events = make_session()
    encoder = EventEncoder()
    values = [encoder.encode(e) for e in events]
    info = SessionInfo(server="http://127.0.0.1:8000", model="model", simulated=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".ndjson", ".ndjson.gz"):
            counter = iter(range(10**6))

            def record(suffix=suffix, counter=counter) -> None:
                path = Path(tmp) / f"rec{next(counter)}{suffix}"
                with Recorder(path, info, clock=FakeClock()) as rec:
                    for e in events:
                        rec.write(e)

            def bare_write(suffix=suffix, counter=counter) -> None:
                path = Path(tmp) / f"bare{next(counter)}{suffix}"
                with _open(path, "wt") as f:
                    dumps = json.JSONEncoder(separators=(",", ":")).encode
                    f.write(dumps({"format": "specmon-session", "version": 1}) + "\n")
                    for v in values:
                        f.write(dumps(v) + "\n")
                    f.flush()
                    os.fsync(f.fileno())

            w_rec, w_bare, w_ratio = paired(record, bare_write, args.repeat)
            path = Path(tmp) / f"read{suffix}"
            with Recorder(path, info, clock=FakeClock()) as rec:
                for e in events:
                    rec.write(e)

            def read(path=path) -> None:
                got = read_recording(path)
                assert len(got.events) == len(events)

            def bare_read(path=path, suffix=suffix) -> None:
                loads = json.loads
                with _open(path, "rb") as f:
                    for line in f:
                        loads(line)

            r_rec, r_bare, r_ratio = paired(read, bare_read, args.repeat)
            size = path.stat().st_size
            rows.append((suffix, "write", w_rec, w_bare, w_ratio, size))
            rows.append((suffix, "read", r_rec, r_bare, r_ratio, size))
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    chunks = sum(isinstance(e, StreamChunk) for e in events)
    print(f"recording I/O — {dt.date.today()} — {machine}")
    print(f"{len(events)} events ({chunks} chunks), medians of {args.repeat} interleaved rounds")
    print()
    print("| file | op | specmon (ms) | bare loop (ms) | ratio (median) | goal | file size |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for suffix, op, ours, bare, ratio, size in rows:
        print(
            f"| {suffix} | {op} | {ours * 1e3:.1f} | {bare * 1e3:.1f} | {ratio:.2f}x "
            f"| ≤ 1.5x | {size / 1024:.0f} KiB |"
        )


if __name__ == "__main__":
    main()
