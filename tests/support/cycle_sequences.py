"""Speed sequences for the cycle detector's tests and benchmark: the aperiodic generator the
false-positive bound is measured with, and cycles whose spacing varies (jittered).

Pure functions of a `random.Random`, so a seed gives the same sequence everywhere."""

from __future__ import annotations

import random
from dataclasses import dataclass

SEED_CYCLE = [221, 214, 218, 222, 230, 103, 59, 62, 62, 212]
"""The seed's ten runs at n_spec = 8: 5 fast, 1 transition, 3 degraded, 1 recovery."""

APERIODIC_KINDS = ("two", "gauss", "walk", "step")


def aperiodic(rng: random.Random) -> list[float]:
    """20-60 speeds with no recurring pattern (cycle.py's docstring); see aperiodic_of_kind."""
    return aperiodic_of_kind(rng)[1]


def aperiodic_of_kind(
    rng: random.Random, lengths: tuple[int, int] = (20, 60)
) -> tuple[str, list[float]]:
    """(kind, speeds): iid two-level speeds (degraded with probability 0.1-0.5, noise up to
    10%), iid Gaussian speeds (sigma 1-40%), a random walk (step sigma 10%) or a single step
    change, each kind with probability 1/4; 20-60 speeds unless `lengths` says otherwise (the
    session's window holds 200)."""
    n = rng.randint(*lengths)
    kind = rng.choice(APERIODIC_KINDS)
    high = rng.uniform(100, 300)
    if kind == "two":
        q = rng.uniform(0.1, 0.5)
        low = high * rng.uniform(0.2, 0.6)
        noise = rng.uniform(0, 0.1) * high
        return kind, [(low if rng.random() < q else high) + rng.gauss(0, noise) for _ in range(n)]
    if kind == "gauss":
        sigma = rng.uniform(0.01, 0.4) * high
        return kind, [rng.gauss(high, sigma) for _ in range(n)]
    if kind == "walk":
        x, out = high, []
        for _ in range(n):
            x = max(1.0, x + rng.gauss(0, 0.1 * high))
            out.append(x)
        return kind, out
    k = rng.randint(2, n - 2)
    low = high * rng.uniform(0.2, 0.6)
    noise = rng.uniform(0, 0.05) * high
    return kind, [(high if i < k else low) + rng.gauss(0, noise) for i in range(n)]


def with_stray_dip(
    rng: random.Random, speeds: list[float], low: float, fast_at: float
) -> tuple[list[float], int]:
    """`speeds` with one request that has two requests of at least `fast_at` on each side (a fast
    phase) replaced by `low`: a one-off dip. (speeds, its index)."""
    candidates = [
        i for i in range(2, len(speeds) - 2) if all(x >= fast_at for x in speeds[i - 2 : i + 3])
    ]
    at = rng.choice(candidates)
    out = list(speeds)
    out[at] = low
    return out, at


def isolated_dips(rng: random.Random) -> list[float]:
    """Steady speeds (±5%) of 20-200 requests where each request, with probability 2-15%, is a
    one-off slow one (a long prompt, a neighbour's burst) at 20-60% of the fast speed."""
    n = rng.randint(20, 200)
    high = rng.uniform(100, 300)
    q = rng.uniform(0.02, 0.15)
    out = []
    for _ in range(n):
        x = high * rng.uniform(0.95, 1.05)
        out.append(x * rng.uniform(0.2, 0.6) if rng.random() < q else x)
    return out


@dataclass(frozen=True)
class Jittered:
    """A generated cycle whose spacing varies, and what a detector should see in it."""

    speeds: list[float]
    starts: tuple[int, ...]
    """Index of each degradation episode's first point in `speeds` (0 = cut by the window)."""
    degraded: int
    """Degraded points in `speeds`."""
    transition: bool


def jittered(
    rng: random.Random,
    *,
    period_min: int,
    spread: int,
    cycles: int,
    degraded: int,
    transition: bool,
    high: float,
    drop: float,
    fast_noise: float,
    degraded_noise: float,
    phase: int,
    degraded_jitter: bool = False,
) -> Jittered:
    """`cycles` cycles, each `period_min` to `period_min + spread` requests long (drawn per cycle):
    optional transition point halfway between the levels, `degraded` degraded points (one more in
    some cycles when `degraded_jitter`), then fast points (at least two; the first is the
    recovery). Fast points vary by ±`fast_noise` of `high`, degraded and transition ones by
    ±`degraded_noise` of the gap. The first `phase` points are dropped (a window that starts
    anywhere in a cycle)."""
    low = high * (1 - drop)
    gap = high - low
    speeds: list[float] = []
    episodes: list[tuple[int, int]] = []  # [start, end) of each episode
    for _ in range(cycles):
        length = period_min + rng.randint(0, spread)
        d = degraded + (degraded_jitter and rng.random() < 0.5)
        fast = length - transition - d
        assert fast >= 2, "a cycle needs at least two fast points"
        start = len(speeds)
        if transition:
            speeds.append((high + low) / 2 + rng.uniform(-degraded_noise, degraded_noise) * gap)
        for _ in range(d):
            speeds.append(low + rng.uniform(-degraded_noise, degraded_noise) * gap)
        episodes.append((start, len(speeds)))
        for _ in range(fast):
            speeds.append(high * (1 + rng.uniform(-fast_noise, fast_noise)))
    # A window that starts at `phase`: an episode begun before it starts at 0 when one of its
    # degraded points is still inside, and is gone otherwise.
    starts = tuple(
        max(a - phase, 0) for a, b in episodes if b > phase and b - 1 >= max(a + transition, phase)
    )
    degraded_seen = sum(max(0, b - max(a + transition, phase)) for a, b in episodes)
    return Jittered(
        speeds=speeds[phase:], starts=starts, degraded=degraded_seen, transition=transition
    )
