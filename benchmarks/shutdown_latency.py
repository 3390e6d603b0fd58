"""Time from a stop signal to the process's exit, for every long-running command, under load.

Run:  PYTHONPATH=src python benchmarks/shutdown_latency.py [--runs 10] [--busy 2]

Each command (`watch --json`, `watch` on a pty, `demo`, `sim`) is started, waited for until it
prints its first output, then sent SIGINT or SIGTERM at a random moment within the next second;
the wall time to its exit is recorded, while `--busy` processes spin on the CPU. Prints the
median, p90 and maximum per command and signal, and any exit that was not clean.
"""

from __future__ import annotations

import argparse
import os
import pty
import random
import signal
import subprocess
import sys
import threading
import time

from specmon.sim.server import SimConfig, start_in_thread

COMMANDS = {
    "watch --json": (["watch", "--json", "--interval", "0.3"], b'"schema"', False, True),
    "watch (pty)": (["watch", "--interval", "0.3"], b"specmon watch", True, True),
    "demo": (["demo", "--speed", "20", "--max-tokens", "64"], b"[SIMULATED] r", False, False),
    "sim": (["sim", "--port", "0", "--speed", "50"], b"Ctrl-C stops it", False, False),
}


def run_once(args: list[str], marker: bytes, tty: bool, sig: signal.Signals) -> tuple[float, int]:
    env = dict(os.environ, COLUMNS="120", LINES="40", TERM="xterm-256color")
    if tty:
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmon", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        fd = master
    else:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmon", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
    seen = threading.Event()
    buf = bytearray()

    def read() -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            buf.extend(data)
            if marker in buf:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    if not seen.wait(60):
        proc.kill()
        raise RuntimeError(f"{args} never got ready")
    time.sleep(random.uniform(0, 1.0))
    t0 = time.monotonic()
    proc.send_signal(sig)
    code = proc.wait(30)
    took = time.monotonic() - t0
    if tty:
        os.close(master)
    return took, code


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--only", default=None, help="one command name, e.g. sim")
    args = ap.parse_args()
    spin = "import time\nend = time.monotonic() + 1800\nwhile time.monotonic() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(args.busy)]
    print(
        f"# shutdown latency, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"{args.busy} busy loops, {args.runs} runs each"
    )
    try:
        with start_in_thread(SimConfig(speed=20.0, n_spec=8), log_sink=lambda _l: None) as sim:
            for name, (base, marker, tty, attach) in COMMANDS.items():
                if args.only is not None and not name.startswith(args.only):
                    continue
                for sig in (signal.SIGINT, signal.SIGTERM):
                    cmd = [*base, "--attach", sim.url] if attach else list(base)
                    times, codes = [], set()
                    for _ in range(args.runs):
                        took, code = run_once(cmd, marker, tty, sig)
                        times.append(took)
                        codes.add(code)
                    times.sort()
                    print(
                        f"{name:14} {sig.name:7} median {1000 * times[len(times) // 2]:6.0f} ms"
                        f"  p90 {1000 * times[int(0.9 * (len(times) - 1))]:6.0f} ms"
                        f"  max {1000 * times[-1]:6.0f} ms  exit {sorted(codes)}",
                        flush=True,
                    )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
