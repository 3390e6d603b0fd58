"""The session state's memory over a long session (the soak that used to run in the unit tests):
a default `SessionState` fed 10 hours at 1 Hz, its traced memory (tracemalloc) every hour.

The session (tests/support/session_soak.py): a /metrics scrape and a GPU sample every second, a
request every `--every` seconds (40 steps of 5 tokens), a log line every 10 s, a marker every
10 minutes, a server restart every hour (counters reset). Every container of the state is a ring
or a fixed-size fold, so once the rings are full (request rows: 500 requests, ~83 min at the
default rate) memory should stay flat, under MEMORY_CAP_BYTES. The unit test
(tests/unit/test_session_state.py) checks the same in short, on a dense session.

    PYTHONPATH=src python3 benchmarks/session_soak.py [--hours 10] [--every 10]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.retained import session_retained
from tests.support.session_feed import SRC
from tests.support.session_soak import Soak

from specmon.core.events import SessionInfo
from specmon.core.session_state import MEMORY_CAP_BYTES, SessionState

SHOWN = ("rows", "itl", "speeds", "markers", "resets", "server_history", "gpu_history")
"""The retained counts printed (session_retained's keys)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=int, default=10, help="session hours to fold (default 10)")
    ap.add_argument("--every", type=int, default=10, help="seconds between requests (default 10)")
    args = ap.parse_args()

    state = SessionState(SessionInfo(server=SRC, model="tiny", n_spec=4, vllm_version="0.32.0"))
    soak = Soak(request_every=args.every)
    tracemalloc.start()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    rows = []
    for hour in range(1, args.hours + 1):
        soak.run(state, 3600)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        counts = session_retained(state)
        rows.append(
            (
                hour,
                soak.requests,
                soak.events,
                (current - base) / 2**20,
                (peak - base) / 2**20,
                " / ".join(str(counts[k]) for k in SHOWN),
                time.perf_counter() - started,
            )
        )
    tracemalloc.stop()
    summary = state.snapshot()["requests"]["summary"]

    machine = platform.processor() or platform.machine()
    print(
        f"{datetime.date.today()}  {machine}  {os.cpu_count()} CPUs  "
        f"Python {platform.python_version()}  (tracemalloc on)"
    )
    print(f"a request every {args.every} s, a scrape and a GPU sample every second")
    print(f"cap MEMORY_CAP_BYTES = {MEMORY_CAP_BYTES / 2**20:.1f} MiB")
    print()
    print(f"| hour | requests | events | current MiB | peak MiB | {' / '.join(SHOWN)} | wall s |")
    print("|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:.2f} | {r[4]:.2f} | {r[5]} | {r[6]:.1f} |")
    first_full = next((r for r in rows if r[0] >= 2), rows[0])
    print()
    print(
        f"growth from hour {first_full[0]} to {rows[-1][0]}: "
        f"{(rows[-1][3] - first_full[3]) * 1024:.1f} KiB; "
        f"requests counted in the summary: {summary['total']:,}"
    )
    if rows[-1][3] * 2**20 > MEMORY_CAP_BYTES:
        print("OVER THE CAP")
        sys.exit(1)


if __name__ == "__main__":
    main()
