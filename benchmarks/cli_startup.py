"""How long `specmon --help` takes, beside a bare interpreter, and what it imports.

Run:  PYTHONPATH=src python benchmarks/cli_startup.py [--runs 20]

Prints the median and p90 wall time of `python -m specmon --help`, of `python -c pass` (the
interpreter's own start, with this environment's site-packages), and the heaviest imports of the
help path (`-X importtime`, cumulative microseconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t0)
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    py = sys.executable
    print(f"# cli startup, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {args.runs} runs")
    for name, cmd in (
        ("python -c pass", [py, "-c", "pass"]),
        ("python -m specmon --help", [py, "-m", "specmon", "--help"]),
        ("python -m specmon watch --help", [py, "-m", "specmon", "watch", "--help"]),
    ):
        t = timed(cmd, args.runs)
        p90 = t[int(0.9 * (len(t) - 1))]
        print(f"{name:34} median {statistics.median(t) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms")
    done = subprocess.run(
        [py, "-X", "importtime", "-m", "specmon", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("heaviest imports (cumulative us):")
    for us, name in sorted(rows, reverse=True)[:8]:
        print(f"  {us:8d} {name}")


if __name__ == "__main__":
    main()
