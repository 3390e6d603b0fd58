"""How long `specmon demo` takes to draw its first frame, and then to show its server `up`.

Run:  PYTHONPATH=src python benchmarks/first_frame.py [--runs 7] [--command "specmon demo"]

Each run starts the command in a tmux pane of its own (160x45, a tmux server of its own) and
reads the pane every ~10 ms, as a person would read the screen, until it shows:

- first frame: anything drawn at all (the app's first screen);
- connected: the header names the model instead of `connecting…` (the app's session is started
  and the server identified: what was timed as "connecting…");
- up: the side panel shows `● up` (the first /metrics scrape folded and drawn).

Times are from just before tmux is asked to start the pane (tmux's own start, ~10 ms, is
included). Prints each run, then the median and the spread (min-max) of each, the load average
before and after, and the specmon source measured. Compare two trees by running the script with
PYTHONPATH pointing at each, in the same minutes (the machine's load moves these numbers more
than anything else).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import uuid

POLL_S = 0.01
LIMIT_S = 60.0
"""Bound on one run (a failure bound, not a target)."""


def _pane(socket: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, "capture-pane", "-p"], capture_output=True, text=True, check=False
    )
    return done.stdout


def one_run(command: str) -> dict[str, float | None]:
    socket = f"specmon-ff-{uuid.uuid4().hex[:8]}"
    found: dict[str, float | None] = {"first frame": None, "connected": None, "up": None}
    t0 = time.perf_counter()
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-x", "160", "-y", "45", command],
        check=True,
    )
    try:
        while time.perf_counter() - t0 < LIMIT_S and None in found.values():
            screen = _pane(socket)
            now = time.perf_counter() - t0
            top = (screen.splitlines() or [""])[0].strip()  # the app's header row
            if top and found["first frame"] is None:
                found["first frame"] = now
            if found["connected"] is None and top.startswith("model "):
                found["connected"] = now
            if "● up" in screen:
                found["up"] = now
            time.sleep(POLL_S)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], check=False, capture_output=True)
    return found


def _source(where: str) -> str:
    """The measured tree as a commit (no machine paths in the output)."""
    done = subprocess.run(
        ["git", "-C", where, "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return f"at {done.stdout.strip()}" if done.returncode == 0 else "(not a git checkout)"


def _row(name: str, values: list[float]) -> str:
    if not values:
        return f"| {name} | — | — | 0 |"
    return (
        f"| {name} | {statistics.median(values):.2f} s | "
        f"{min(values):.2f}-{max(values):.2f} s | {len(values)} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--command", default="specmon demo")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("first_frame: needs tmux")
    import specmon

    load_before = os.getloadavg()
    print(
        f"# first frame of `{args.command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"specmon {_source(os.path.dirname(specmon.__file__))}"
    )
    # the pane runs in this environment (PYTHONPATH included); `exec` leaves no shell between
    command = f"exec {args.command}"
    runs = []
    for i in range(args.runs):
        found = one_run(command)
        runs.append(found)
        shown = "  ".join(f"{k} {v:.2f} s" if v is not None else f"{k} —" for k, v in found.items())
        print(f"run {i + 1}: {shown}", flush=True)
    load_after = os.getloadavg()
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("| from process start to | median | spread (min-max) | runs |")
    print("|---|---:|---:|---:|")
    for key in ("first frame", "connected", "up"):
        print(_row(key, [v for r in runs if (v := r[key]) is not None]))
    for key in ("connected", "up"):
        gaps = [
            c - f for r in runs if (c := r[key]) is not None and (f := r["first frame"]) is not None
        ]
        print(_row(f"{key}, after the first frame", gaps))
    print(f"# command: {shlex.join(shlex.split(args.command))}")


if __name__ == "__main__":
    main()
