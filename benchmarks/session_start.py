"""How long a collector-process session takes to start and show its server `up`, on loopback.

Run:  PYTHONPATH=src python benchmarks/session_start.py [--runs 5]

Starts the simulator on a free loopback port (in a thread), then, in a fresh interpreter per run
(as the app's connect worker meets it: nothing imported yet), measures:

- imports: importing runtime.session and the session state;
- start: `CollectorProcess.start()`: spawning the collector, its imports, identifying the
  server, until its hello;
- hello → up: until the folded view shows the server `up` (its first /metrics scrape).

Prints each run, then the median and spread of each. This is the runtime's part of the
`connecting…` time after chat's first frame (docs/benchmarks.md, "First frame and time to up");
benchmarks/first_frame.py measures the whole app.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import sys, time

def main():
    t0 = time.monotonic()
    from specmon.core.session_state import SessionState
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import CollectorProcess, SessionConfig
    t1 = time.monotonic()
    config = SessionConfig(targets=(Target(sys.argv[1]),), gpu="none", quiet=True)
    session = CollectorProcess(config, SessionState)
    session.start()
    t2 = time.monotonic()
    deadline = t2 + 60
    while time.monotonic() < deadline:
        view = session.view(fresh=True)
        if view is not None and view.servers and view.servers[0].status == "up":
            break
        time.sleep(0.005)
    t3 = time.monotonic()
    session.stop()
    print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t3 - t2:.4f}")

if __name__ == "__main__":
    main()
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from specmon.sim.server import SimConfig, start_in_thread

    names = ("imports", "start (hello)", "hello -> up", "total")
    rows: list[tuple[float, ...]] = []
    print(
        f"# session start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    with start_in_thread(SimConfig(seed=1), log_sink=lambda _l: None) as sim:
        for i in range(args.runs):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, sim.url], capture_output=True, text=True, check=True
            )
            parts = tuple(float(x) for x in done.stdout.split())
            row = (*parts, sum(parts))
            rows.append(row)
            shown = "  ".join(f"{n} {v:.2f} s" for n, v in zip(names, row, strict=True))
            print(f"run {i + 1}: {shown}", flush=True)
    print(f"load average (1 min) after {os.getloadavg()[0]:.2f}")
    print("| part | median | spread (min-max) |")
    print("|---|---:|---:|")
    for j, name in enumerate(names):
        values = [r[j] for r in rows]
        print(
            f"| {name} | {statistics.median(values):.2f} s | "
            f"{min(values):.2f}-{max(values):.2f} s |"
        )


if __name__ == "__main__":
    main()
