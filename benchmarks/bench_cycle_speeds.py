"""How near `specmon bench`'s cycle means come to the simulator's step model, through HTTP.

The run of tests/bench/test_bench_sim.py's cycle test (`cycle:5f,1t,3d,1r` at n=8, 30 requests
of 256 tokens in and out, one at a time) at several simulator speeds: the fast-phase mean and the
long-run mean that `bench` reports (divided by the speed) against the step model's speeds for
the phases, and the ratio of the two means against the model's. The test checks the means as
folds of the measured speeds; how close those speeds come to the model depends on the machine
(the client must keep up with every chunk), so it is measured here. Run it with and without load
beside it to see the effect. Prints a Markdown table; `--out FILE` also writes it.

    python benchmarks/bench_cycle_speeds.py [--speeds 5,10,20] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specmon.bench.analysis import analyze
from specmon.bench.config import BenchConfig
from specmon.bench.runner import run_bench
from specmon.bench.servers import endpoint_for
from specmon.sim import step_model as sm
from specmon.sim.profiles import PROFILES
from specmon.sim.server import SimConfig, start_in_thread

PROFILE = PROFILES["gemma4-26b-rtx5090m"]
N_SPEC, LENGTH, REQUESTS = 8, 256, 30
SCHEDULE = "cycle:5f,1t,3d,1r"


def model_means() -> tuple[float, float]:
    """The step model's fast-phase speed and the plain mean of one cycle's ten request speeds."""
    speed = {
        phase: sm.expected_output_throughput(
            PROFILE, N_SPEC, LENGTH, LENGTH, sm.phase_acceptance_scale(PROFILE, N_SPEC, phase)
        )
        for phase in "ftdr"
    }
    fast = speed["f"]
    return fast, (5 * fast + speed["t"] + 3 * speed["d"] + speed["r"]) / 10


def one_run(speed: float) -> tuple[float, float] | None:
    """The fast-phase and long-run means one bench run reports, per unit of simulator speed
    (None when it found no cycle)."""
    config = BenchConfig(
        input_len=LENGTH, output_len=LENGTH, num_prompts=REQUESTS, warmups=0, ignore_eos=True
    )
    sim = SimConfig(profile=PROFILE.name, n_spec=N_SPEC, speed=speed, schedule=SCHEDULE)
    with start_in_thread(sim, log_sink=lambda _line: None) as server:
        out = asyncio.run(run_bench(endpoint_for(server.url), config, scrape_interval=60.0))
    cycle = analyze(out.events, server=out.server, config=config).cycle
    if cycle is None:
        return None
    return cycle.fast_mean_tok_s / speed, cycle.long_run_mean_tok_s / speed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speeds", default="5,10,20", help="simulator speeds, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    fast_model, long_model = model_means()
    lines = [
        f"bench cycle means against the step model: {SCHEDULE} at n={N_SPEC}, {REQUESTS} requests"
        f" of {LENGTH}+{LENGTH} tokens; {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()},"
        f" {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        f"model: fast {fast_model:.1f} tok/s, long-run {long_model:.1f} tok/s,"
        f" ratio {long_model / fast_model:.3f}",
        "",
        "| speed | run | fast / model | long-run / model | ratio / model's |",
        "|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for speed in (float(s) for s in args.speeds.split(",")):
        for run in range(1, args.repeats + 1):
            means = one_run(speed)
            if means is None:
                row = f"| {speed:g}x | {run} | no cycle found | | |"
            else:
                fast, long_run = means
                row = (
                    f"| {speed:g}x | {run} | {fast / fast_model:.3f} | {long_run / long_model:.3f}"
                    f" | {(long_run / fast) / (long_model / fast_model):.3f} |"
                )
            print(row, flush=True)
            lines.append(row)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
