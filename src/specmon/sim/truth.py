"""Ground truth of the simulated server (`specmon sim --truth FILE`, `specmon demo --truth FILE`).

The simulator knows what a monitor can only infer: which state its engine was really in for
each request, and what it was set up to do over the session. With a truth file it writes that
beside what it serves, as JSON lines, so a verdict can be scored against it
(benchmarks/verdicts.py). The monitor never reads it. Definitions (docs/diagnosis.md, "Ground
truth"):

- one `{"kind": "session", ...}` line first: profile, K, the healthy AL, the vanilla speed ratio
  of a fully rejected step, the schedule and its degradation period (None when it has none), the
  context drift and its cliff (the context at which the expected AL is halfway between healthy
  and the drift's floor), the thermal drift, the uptime drift, loop and garble periods;
- one `{"kind": "request", ...}` line per generation request as it leaves the engine (or as it is
  refused for its length), keyed by `request_id`: the `request_id` the client put in the body
  (vLLM's own field, which specmon's demo sets to the id in its recording), else the server's
  response id. `state` is one of STATES (see `request_state`);
- one `{"kind": "restart", ...}` line when a fault restarts the server (counters reset).

Every line is flushed as it is written, so a reader sees every finished request.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import IO, Any

from specmon.sim import step_model
from specmon.sim.drift import BASE_CLOCK_MHZ, Drift
from specmon.sim.profiles import Profile
from specmon.sim.schedule import Schedule

STATES = ("fast", "transition", "degraded", "drifted", "loop", "garbled", "overflow-retry")
"""The engine states a request can be labelled with (`request_state`)."""

VANILLA_RATIO = 1.1
"""A request whose expected decode speed is at most this many times the vanilla speed (the same
model without speculation, at the same clock and batch) ran at vanilla speed: `degraded`."""
DRIFTED_AL_SHARE = 0.7
"""A request whose expected AL is below this share of the healthy AL (and above vanilla speed)
ran on a drifted engine: `drifted` (the canary's target: 30% below its healthy AL)."""


def expected_al(profile: Profile, n_spec: int, scale: float) -> float:
    """The expected acceptance length at this acceptance scale (step model)."""
    return step_model.expected_acceptance_length(
        step_model.conditional_acceptance(profile, n_spec, scale)
    )


def vanilla_ratio(profile: Profile, n_spec: int, al: float) -> float:
    """Expected decode speed at acceptance length `al` over the vanilla speed (same clock and
    batch: both stretch a step alike, so they cancel)."""
    return al * step_model.step_time(profile, 0) / step_model.step_time(profile, n_spec)


def cycle_period(schedule: Schedule | None) -> int | None:
    """The degradation cycle's period of a schedule: the length of its shortest repeating unit
    when it repeats and mixes fast requests with slower phases; None otherwise (all fast, held)."""
    if schedule is None or not schedule.repeat:
        return None
    phases = [e.phase for e in schedule.entries]
    if all(p in ("f", "r") for p in phases) or all(p == phases[0] for p in phases):
        return None
    n = len(phases)
    for size in range(1, n + 1):
        if n % size == 0 and phases == phases[:size] * (n // size):
            return size
    return n


def context_cliff_tokens(profile: Profile, n_spec: int, drift: Drift) -> int | None:
    """The context (tokens) at which a context drift's expected AL is halfway between the healthy
    AL and the AL at its floor; None without a context drift."""
    lo, hi = drift.context_lo, drift.context_hi
    if lo is None or hi is None:
        return None
    top = expected_al(profile, n_spec, 1.0)
    bottom = expected_al(profile, n_spec, drift.context_floor)
    mid = (top + bottom) / 2
    low, high = drift.context_floor, 1.0
    for _ in range(60):
        scale = (low + high) / 2
        if expected_al(profile, n_spec, scale) < mid:
            low = scale
        else:
            high = scale
    scale = (low + high) / 2
    frac = (1.0 - scale) / (1.0 - drift.context_floor) if drift.context_floor < 1 else 0.0
    return round(lo + frac * (hi - lo))


def request_state(
    *,
    loops: bool,
    garbled: bool,
    phase: str,
    ratio: float,
    first_ratio: float,
    last_ratio: float,
    al_share: float,
) -> str:
    """The state a request ran in, first match wins:
    loop / garbled (the drift made its text so); degraded (expected speed at most VANILLA_RATIO
    times vanilla, over its steps); transition (the schedule's transition phase, or a request
    whose first and last steps fall on either side of VANILLA_RATIO: its decode straddled a change
    of state); drifted (expected AL below DRIFTED_AL_SHARE of the healthy AL); else fast (the
    schedule's recovery phase, at 95% of fast acceptance, is fast)."""
    if loops:
        return "loop"
    if garbled:
        return "garbled"
    if ratio <= VANILLA_RATIO:
        return "degraded"
    if phase == "t" or (first_ratio <= VANILLA_RATIO) != (last_ratio <= VANILLA_RATIO):
        return "transition"
    if al_share < DRIFTED_AL_SHARE:
        return "drifted"
    return "fast"


@dataclass(slots=True)
class RequestTruth:
    """What the engine knows of one request while it runs (sums over its decode steps)."""

    number: int
    key: str
    server_id: str
    client_request_id: str | None
    phase: str
    loops: bool
    garbled: bool
    prompt_tokens: int
    arrival_s: float
    """Server clock, seconds since the server started."""
    steps: int = 0
    al_sum: float = 0.0
    first_al: float | None = None
    last_al: float = 0.0
    clock_first_mhz: float | None = None
    clock_last_mhz: float | None = None


class TruthLog:
    """Writes the truth lines to a text stream (one JSON value a line, flushed each time)."""

    def __init__(self, out: IO[str], profile: Profile, n_spec: int) -> None:
        self.out = out
        self.profile = profile
        self.n_spec = n_spec
        self.healthy_al = expected_al(profile, n_spec, 1.0)
        self._al_cache: dict[float, float] = {}

    def _write(self, line: dict[str, Any]) -> None:
        self.out.write(json.dumps(line, separators=(",", ":")) + "\n")
        self.out.flush()

    def close(self) -> None:
        self.out.close()

    def session(self, schedule: Schedule | None, drift: Drift, seed: int) -> None:
        """The session line (written once, first)."""
        p, k = self.profile, self.n_spec
        self._write(
            {
                "kind": "session",
                "profile": p.name,
                "n_spec": k,
                "seed": seed,
                "healthy_al": round(self.healthy_al, 4),
                "degraded_vanilla_ratio": round(vanilla_ratio(p, k, 1.0), 4),
                "schedule": schedule.source if schedule is not None else None,
                "cycle_period": cycle_period(schedule),
                "context_drift": (
                    None
                    if drift.context_lo is None
                    else {
                        "lo": drift.context_lo,
                        "hi": drift.context_hi,
                        "floor": drift.context_floor,
                    }
                ),
                "context_cliff_tokens": context_cliff_tokens(p, k, drift),
                "thermal_heat_s": drift.heat_s,
                "uptime_half_life_s": drift.uptime_half_life_s,
                "loop_every": drift.loop_every,
                "garble_every": drift.garble_every,
            }
        )

    def al_at(self, scale: float) -> float:
        """Expected AL at this acceptance scale (cached by the scale, rounded)."""
        key = round(scale, 4)
        found = self._al_cache.get(key)
        if found is None:
            found = self._al_cache[key] = expected_al(self.profile, self.n_spec, min(key, 10.0))
        return found

    def step(self, truth: RequestTruth, scale: float, clock_mhz: float) -> None:
        """One decode step of a request at this acceptance scale and SM clock."""
        al = self.al_at(scale) if self.n_spec > 0 else 1.0
        truth.steps += 1
        truth.al_sum += al
        if truth.first_al is None:
            truth.first_al = al
            truth.clock_first_mhz = clock_mhz
        truth.last_al = al
        truth.clock_last_mhz = clock_mhz

    def request(self, truth: RequestTruth, *, tokens: int, finish: str, end_s: float) -> None:
        """The request's line, as it leaves the engine."""
        p, k = self.profile, self.n_spec
        al = truth.al_sum / truth.steps if truth.steps else self.healthy_al
        first = truth.first_al if truth.first_al is not None else al
        ratio = vanilla_ratio(p, k, al)
        share = al / self.healthy_al if self.healthy_al > 0 else 1.0
        state = request_state(
            loops=truth.loops,
            garbled=truth.garbled,
            phase=truth.phase,
            ratio=ratio,
            first_ratio=vanilla_ratio(p, k, first),
            last_ratio=vanilla_ratio(p, k, truth.last_al),
            al_share=share,
        )
        self._write(
            {
                "kind": "request",
                "request_id": truth.key,
                "n": truth.number,
                "server_id": truth.server_id,
                "client_request_id": truth.client_request_id,
                "state": state,
                "phase": truth.phase,
                "expected_al": _round(al),
                "al_share": _round(share),
                "vanilla_ratio": _round(ratio),
                "decode_steps": truth.steps,
                "tokens": tokens,
                "finish": finish,
                "prompt_tokens": truth.prompt_tokens,
                "clock_mhz": [truth.clock_first_mhz, truth.clock_last_mhz],
                "throttled": truth.clock_last_mhz is not None
                and truth.clock_last_mhz < BASE_CLOCK_MHZ,
                "t": [_round(truth.arrival_s), _round(end_s)],
            }
        )

    def refused(self, key: str, client_request_id: str | None, reason: str, t_s: float) -> None:
        """A request refused for its length (the client drops a turn and retries)."""
        self._write(
            {
                "kind": "request",
                "request_id": key,
                "n": None,
                "server_id": None,
                "client_request_id": client_request_id,
                "state": "overflow-retry",
                "phase": None,
                "reason": reason,
                "t": [_round(t_s), _round(t_s)],
            }
        )

    def restart(self, number: int, t_s: float) -> None:
        self._write({"kind": "restart", "n": number, "t": _round(t_s)})


def _round(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


def open_truth(path: str, profile: Profile, n_spec: int) -> TruthLog:
    """A TruthLog writing to `path` (created or truncated); OSError when it cannot be opened."""
    return TruthLog(open(path, "w", encoding="utf-8"), profile, n_spec)
