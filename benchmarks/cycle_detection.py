"""The cycle detector's false-positive rate on aperiodic input and its detection rate on cycles
whose spacing varies, on the generators of tests/support/cycle_sequences.py (fixed seeds).

- aperiodic: the generator the stated bound (cycle.FALSE_POSITIVE_BOUND) is measured with: iid
  two-level speeds, iid Gaussian, random walks, single step changes (20-60 speeds each);
- isolated dips: steady speeds with random one-off slow requests (20-200 speeds);
- jittered windows of 200 requests with one stray one-off dip (test_property_a_stray_dip...);
- aperiodic, 100-200 speeds: the same kinds at the length of the session's window;
- jittered: cycles of period_min..period_min+spread requests (period_min 5-15, spread 1, or up
  to 2 from period 8 on), 5-8 cycles, fast phase ±0-15% noise (at most 18% of the gap), degraded
  phase ±0-8% of the gap, the window starting anywhere in a cycle (as the property test draws
  them); detected: a report whose period range and episode count are the generated ones.

Also the cost of one call on 200 speeds (the session state's window, run once per finished
request): the median of interleaved rounds.

    python benchmarks/cycle_detection.py [--trials 20000] [--jittered 5000]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.cycle_sequences import (  # noqa: E402
    APERIODIC_KINDS,
    SEED_CYCLE,
    Jittered,
    aperiodic_of_kind,
    isolated_dips,
    jittered,
    with_stray_dip,
)

from specmon.core.detectors.cycle import FALSE_POSITIVE_BOUND, detect_cycle, max_spread  # noqa: E402


def draw_jittered(rng: random.Random) -> Jittered:
    """One jittered cycle with parameters drawn as the property test draws them."""
    period_min = rng.randint(5, 15)
    spread = rng.randint(1, max_spread(period_min))
    transition = rng.random() < 0.5
    degraded = rng.randint(1, period_min - 2 - transition - 1)
    drop = rng.uniform(0.35, 0.85)
    return jittered(
        rng,
        period_min=period_min,
        spread=spread,
        cycles=rng.randint(5, 8),
        degraded=degraded,
        transition=transition,
        high=rng.uniform(80, 400),
        drop=drop,
        fast_noise=rng.uniform(0, min(0.15, 0.18 * drop)),
        degraded_noise=rng.uniform(0, 0.08),
        phase=rng.randint(0, period_min - 1),
        degraded_jitter=rng.random() < 0.3,
    )


def found(g: Jittered) -> bool:
    r = detect_cycle(g.speeds)
    known = [s for s in g.starts if s > 0]
    periods = [b - a for a, b in itertools.pairwise(known)]
    return (
        r is not None
        and r.episodes == len(g.starts)
        and r.period_min == min(periods)
        and r.period_max == max(periods)
    )


def stray_found(rng: random.Random) -> bool:
    """A window of 200 requests of a jittered cycle (shortest spacing 7-12) with one one-off
    slow request in a fast phase: found with the period range, the stray left out."""
    period_min = rng.randint(7, 12)
    transition = rng.random() < 0.5
    drop = rng.uniform(0.35, 0.85)
    fast_noise = rng.uniform(0, min(0.15, 0.18 * drop))
    high = rng.uniform(80, 400)
    g = jittered(
        rng,
        period_min=period_min,
        spread=rng.randint(1, max_spread(period_min)),
        cycles=200 // period_min + 1,
        degraded=rng.randint(1, period_min - 5 - transition),
        transition=transition,
        high=high,
        drop=drop,
        fast_noise=fast_noise,
        degraded_noise=rng.uniform(0, 0.08),
        phase=rng.randint(0, period_min - 1),
    )
    speeds, _ = with_stray_dip(rng, g.speeds[:200], high * (1 - drop), high * (1 - fast_noise))
    r = detect_cycle(speeds)
    return r is not None and r.stray_episodes == 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--jittered", type=int, default=5_000)
    args = ap.parse_args()
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )
    rng = random.Random(20261122)  # the test's seed: the same 20,000 sequences
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for _ in range(args.trials):
        kind, speeds = aperiodic_of_kind(rng)
        totals[kind] += 1
        hits[kind] += detect_cycle(speeds) is not None
    total = sum(hits.values())
    print(
        f"aperiodic: {total}/{args.trials} = {total / args.trials:.3%} reported a cycle "
        f"(bound {FALSE_POSITIVE_BOUND:.1%})"
    )
    for kind in APERIODIC_KINDS:
        print(f"  {kind:6s} {hits[kind]}/{totals[kind]} = {hits[kind] / totals[kind]:.3%}")
    rng = random.Random(7)
    dips = sum(detect_cycle(isolated_dips(rng)) is not None for _ in range(args.trials))
    print(f"isolated dips: {dips}/{args.trials} = {dips / args.trials:.3%} reported a cycle")
    rng = random.Random(2026)
    ok = sum(found(draw_jittered(rng)) for _ in range(args.jittered))
    print(
        f"jittered: {ok}/{args.jittered} = {ok / args.jittered:.2%} detected with the generated "
        "period range and episode count"
    )
    ok = sum(stray_found(rng) for _ in range(args.jittered))
    print(
        f"jittered, 200 requests, one stray dip: {ok}/{args.jittered} = "
        f"{ok / args.jittered:.2%} detected with the stray left out"
    )
    rng = random.Random(99)
    hits.clear()
    totals.clear()
    long_trials = args.trials // 5
    for _ in range(long_trials):
        kind, speeds = aperiodic_of_kind(rng, lengths=(100, 200))
        totals[kind] += 1
        hits[kind] += detect_cycle(speeds) is not None
    total = sum(hits.values())
    print(f"aperiodic, 100-200 speeds: {total}/{long_trials} = {total / long_trials:.3%}")
    for kind in APERIODIC_KINDS:
        print(f"  {kind:6s} {hits[kind]}/{totals[kind]} = {hits[kind] / totals[kind]:.3%}")
    print("cost of one call on 200 speeds (median):")
    cost_200()


def cost_200(rounds: int = 15, number: int = 20) -> None:
    """Median µs of one detect_cycle call on 200 speeds: the seed's cycle 20 times, the seed's
    cycle with a varying spacing, iid Gaussian speeds (no two levels: stops early), and dips at
    every 7th and 11th request (many episodes, no regular spacing: every chain is tried)."""
    seed = (SEED_CYCLE * 20)[:200]
    varying: list[float] = []
    for i in range(21):
        varying += SEED_CYCLE[:5] + [220.0] * (i % 2) + SEED_CYCLE[5:]
    rng = random.Random(1)
    gauss = [rng.gauss(200, 20) for _ in range(200)]
    dips = [200.0 if i % 7 and i % 11 else 60.0 for i in range(200)]  # 44 dips, 2 spacings
    cases = {
        "seed cycle x20": seed,
        "spacing 10-11": varying[:200],
        "iid Gaussian": gauss,
        "dips at 7k, 11k": dips,
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, xs in cases.items():
            t0 = time.perf_counter()
            for _ in range(number):
                detect_cycle(xs)
            times[name].append((time.perf_counter() - t0) / number * 1e6)
    for name, ts in times.items():
        r = detect_cycle(cases[name])
        found = r.period_text if r else "no cycle"
        print(f"  {name:15s} {statistics.median(ts):8.0f} µs  ({found})")


if __name__ == "__main__":
    main()
