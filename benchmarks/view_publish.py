"""What a UI read costs: building a SessionView, converting it to the watch JSON, and reading the
published view, for a state holding 500 request rows, 600 history points and one GPU.

Before the typed views (docs/architecture.md, "Data flow"), every UI read built the snapshot dict
under the hub's lock. Now the hub thread rebuilds the view at most 20 times a second when events
changed it, and a reader only reads one reference. Reported as medians of interleaved rounds, and as
ratios in one run.

    PYTHONPATH=src python3 benchmarks/view_publish.py [--rows 500] [--rounds 7] [--before DIR]

`--before DIR`: also time `SessionState.snapshot()` of another source tree (e.g. the commit before
the typed views: `git archive <rev> src | tar -x -C DIR`), in a subprocess on the same feed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.session_feed import SRC, Server, gpu_sample, request_events

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState


def build_state(rows: int) -> SessionState:
    state = SessionState(SessionInfo(server=SRC, n_spec=4), max_requests=rows)
    server = Server(k=4)
    t = 0.0
    for i in range(rows):
        for e in request_events(
            f"r{i}", t, tokens_per_step=3, steps=40, step_s=0.01, server=server
        ):
            state.apply(e)
        state.apply(server.scrape(t + 0.5))
        state.apply(gpu_sample(t + 0.5))
        t += 1.0
    return state


def per_call_us(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--before", metavar="DIR", help="a source tree to time snapshot() of")
    ap.add_argument("--snapshot-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    state = build_state(args.rows)
    if args.snapshot_only:
        values = [per_call_us(state.snapshot, 100) for _ in range(args.rounds)]
        print(f"{statistics.median(values):.2f}")
        return
    state.publish()
    server = Server(k=4)
    clock = [10_000.0]

    def fold_changes() -> None:
        # what changes between two frames of a busy dashboard: a scrape and a GPU sample
        clock[0] += 1.0
        state.apply(server.scrape(clock[0]))
        state.apply(gpu_sample(clock[0]))

    def fold_and_rebuild() -> object:
        fold_changes()
        return state.publish()

    def read() -> object:
        return state.published_view

    cases: dict[str, tuple[Callable[[], object], int]] = {
        "read the published view (a UI read, no lock)": (read, 200_000),
        "fold a scrape + a GPU sample": (fold_changes, 300),
        "fold them + rebuild the view (hub thread, <= 20 Hz)": (fold_and_rebuild, 300),
        "snapshot() = view + JSON conversion (watch --json, off the lock)": (state.snapshot, 100),
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (fn, n) in cases.items():
            results[name].append(per_call_us(fn, n))
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, Python {platform.python_version()}, "
        f"rows {args.rows}, rounds {args.rounds}"
    )
    for name, values in results.items():
        print(f"{name}: {statistics.median(values):,.2f} µs")
    if args.before:
        env = {**os.environ, "PYTHONPATH": str(Path(args.before) / "src")}
        cmd = [sys.executable, __file__, "--snapshot-only", "--rows", str(args.rows)]
        cmd += ["--rounds", str(args.rounds)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        print(f"before: snapshot() under the hub's lock on every UI read: {float(out):,.2f} µs")


if __name__ == "__main__":
    main()
