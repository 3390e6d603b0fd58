"""Memory over a synthetic day: a SessionState with the diagnosis (docs/diagnosis.md) on, fed a day
of events, its traced memory (tracemalloc) at hours 1, 6 and 24.

The day: one answer every `--every` seconds (prompt 200..24,000 tokens, 60 decode steps of AL
falling past 16k context, text that loops in one answer of 50), a /metrics scrape and a GPU
sample every second (the clock throttles from 1725 to 1365 MHz in the afternoon). Everything the
diagnosis holds is a fixed-size fold or a bounded ring, so memory at 24 h should equal memory at
1 h up to noise; the session state's own rings are bounded as before (MEMORY_CAP_BYTES).

    PYTHONPATH=src python3 benchmarks/day_of_events.py [--every 10] [--hours 24]
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

from tests.support.diagnosis_feed import answer, gpu
from tests.support.retained import session_retained
from tests.support.session_feed import SRC, Server

from specmon.core.events import SessionInfo
from specmon.core.session_state import MEMORY_CAP_BYTES, SessionState

WORDS = [f"w{i}" for i in range(997)]
LOOP = ["again", "and", "again"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=float, default=10.0, help="seconds between answers")
    ap.add_argument("--hours", type=int, default=24)
    args = ap.parse_args()
    checkpoints = {h for h in (1, 6, 24) if h <= args.hours}

    tracemalloc.start()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    state = SessionState(SessionInfo(server=SRC, n_spec=4), baseline_tok_s=60.0)
    server = Server(k=4)
    events = answers = 0
    t = 0.0
    next_answer = 0.0
    started = time.perf_counter()
    rows = []
    for hour in range(1, args.hours + 1):
        end = hour * 3600.0
        while t < end:
            afternoon = 12 * 3600 <= t % 86400 < 18 * 3600
            clock = 1365.0 if afternoon else 1725.0
            state.apply(gpu(t, clock, 91.0 if afternoon else 60.0))
            state.apply(server.scrape(t))
            events += 2
            if t >= next_answer:
                prompt = 200 + (answers * 997) % 24_000
                looping = answers % 50 == 49
                tokens = [5 if looping else 2 if prompt > 16_000 else 4] * 60
                words = LOOP if looping else WORDS
                for e in answer(
                    f"r{answers}",
                    t,
                    prompt_tokens=prompt,
                    step_tokens=tokens,
                    step_s=0.02 * 1725.0 / clock,
                    words=words,
                ):
                    state.apply(e)
                    events += 1
                for n in tokens:
                    server.step(n - 1)
                answers += 1
                next_answer += args.every
            if t % 60 == 0:
                state.publish()
            t += 1.0
        if hour in checkpoints:
            state.publish()
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
            d = state.view().diagnosis
            assert d is not None
            rows.append(
                (
                    hour,
                    answers,
                    events,
                    (current - base) / 2**20,
                    (peak - base) / 2**20,
                    session_retained(state)["diagnosis"],
                    d.context.summary or "-",
                    d.quality.loops,
                )
            )
    elapsed = time.perf_counter() - started
    tracemalloc.stop()
    machine = platform.processor() or platform.machine()
    print(
        f"{datetime.date.today()}  {machine}  {os.cpu_count()} CPUs  "
        f"Python {platform.python_version()}  ({elapsed:.0f} s with tracemalloc)"
    )
    print(f"one answer every {args.every:g} s, a scrape and a GPU sample every second")
    print(f"cap MEMORY_CAP_BYTES = {MEMORY_CAP_BYTES / 2**20:.1f} MiB")
    print()
    print(
        "| hour | answers | events | current MiB | peak MiB | diagnosis objects | cliff | loops |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.2f} | {r[5]} | {r[6]} | {r[7]} |")


if __name__ == "__main__":
    main()
