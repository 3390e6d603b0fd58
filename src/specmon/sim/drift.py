"""Drifts of the simulated server (`specmon sim --drift SPEC`): effects that build up with
context length, uptime or heat, for the diagnosis views to find (docs/diagnosis.md). Pure functions.

SPEC is a comma-separated list of items:
- `context:LO:HI[:FLOOR]` — acceptance falls with the context length (prompt + tokens so far):
  full below LO tokens, then linearly down to FLOOR (0..1, default 0.35) of every conditional
  rate at HI and past it. E.g. `context:8192:20480` on the H100 profile gives AL ~7 below 8k and
  ~1.6 past 20k.
- `uptime:HALF_LIFE` — acceptance decays with the server's uptime (model seconds): every rate is
  scaled by 0.5 ** (uptime / HALF_LIFE), floored at 0.
- `thermal[:HEAT_S]` — the simulated GPU heats with decode time: 45 °C rising linearly to 91 °C
  over HEAT_S busy model seconds (default 120); from 85 °C the SM clock falls linearly from
  1725 MHz to 1365 MHz at 91 °C, and every decode step takes 1725 / clock times longer.
- `loop:EVERY` — every EVERY-th request (1-based) loops: its text repeats one short phrase and
  its drafts are accepted as far as they go (as a target repeating itself is easy to draft).
- `garble:EVERY` — every EVERY-th request is garbled: its text is symbol soup and no draft token
  is accepted (as when the target runs off with a broken template or quantisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specmon.core.numbers import parse_float, parse_int

DRIFT_SYNTAX = (
    "context:LO:HI[:FLOOR], uptime:HALF_LIFE_S, thermal[:HEAT_S], loop:EVERY, garble:EVERY"
)

AMBIENT_C = 45.0
HOT_C = 91.0
THROTTLE_FROM_C = 85.0
BASE_CLOCK_MHZ = 1725.0
THROTTLED_CLOCK_MHZ = 1365.0
IDLE_POWER_W = 90.0
BUSY_POWER_W = 420.0
POWER_LIMIT_W = 450.0
LOOP_SCALE = 10.0
"""Acceptance scale of a looping answer (every rate clamps at 1)."""
LOOP_PHRASE = (" the", " same", " words", " again", " and")
GARBLE_TOKENS = (" ##", "@!", " ~~", "}{", " <>", "%%", " ^^", ")(")
"""The symbol soup of a garbled answer."""


class DriftError(ValueError):
    """A --drift value that cannot be parsed (one line naming the valid forms)."""


@dataclass(frozen=True, slots=True)
class Drift:
    context_lo: int | None = None
    context_hi: int | None = None
    context_floor: float = 0.35
    uptime_half_life_s: float | None = None
    heat_s: float | None = None
    loop_every: int | None = None
    garble_every: int | None = None

    @property
    def active(self) -> bool:
        return self != Drift()

    def acceptance_scale(self, context_tokens: int, uptime_s: float) -> float:
        """The factor on every conditional rate at this context and uptime (1 = none)."""
        scale = 1.0
        lo, hi = self.context_lo, self.context_hi
        if lo is not None and hi is not None and context_tokens > lo:
            frac = min(1.0, (context_tokens - lo) / (hi - lo))
            scale *= 1.0 - (1.0 - self.context_floor) * frac
        if self.uptime_half_life_s is not None and uptime_s > 0:
            scale *= 0.5 ** (uptime_s / self.uptime_half_life_s)
        return scale

    def loops(self, request_number: int) -> bool:
        return self.loop_every is not None and request_number % self.loop_every == 0

    def garbles(self, request_number: int) -> bool:
        return self.garble_every is not None and request_number % self.garble_every == 0


@dataclass(frozen=True, slots=True)
class GpuState:
    """The simulated GPU at one instant."""

    temperature_c: float
    sm_clock_mhz: float
    power_w: float
    power_limit_w: float = POWER_LIMIT_W


def gpu_state(heat_s: float | None, busy_s: float, running: int) -> GpuState:
    """Temperature, SM clock and power after `busy_s` model seconds of decode (`heat_s` None:
    no heating, the GPU stays cool at its base clock)."""
    if heat_s is None:
        temp = AMBIENT_C
    else:
        temp = AMBIENT_C + (HOT_C - AMBIENT_C) * min(1.0, busy_s / heat_s)
    if temp <= THROTTLE_FROM_C:
        clock = BASE_CLOCK_MHZ
    else:
        frac = min(1.0, (temp - THROTTLE_FROM_C) / (HOT_C - THROTTLE_FROM_C))
        clock = BASE_CLOCK_MHZ - (BASE_CLOCK_MHZ - THROTTLED_CLOCK_MHZ) * frac
    power = BUSY_POWER_W if running else IDLE_POWER_W
    return GpuState(round(temp, 1), round(clock), power)


def step_stretch(state: GpuState) -> float:
    """How much longer a decode step takes at this clock than at the base clock."""
    return BASE_CLOCK_MHZ / state.sm_clock_mhz


def _number(text: str, item: str, kind: type[int] | type[float]) -> float:
    value = parse_int(text) if kind is int else parse_float(text)
    if value is None:
        raise DriftError(f"bad number {text!r} in drift item {item!r}")
    if not value > 0:
        raise DriftError(f"drift item {item!r}: {text!r} must be positive")
    return value


def parse_drift(spec: str) -> Drift:
    """Parse a `--drift` value; DriftError (one line, naming the valid forms) if bad."""
    fields: dict[str, Any] = {}  # Drift's own fields, each checked as it is parsed
    for raw in spec.split(","):
        item = raw.strip()
        kind, _, rest = item.partition(":")
        args = rest.split(":") if rest else []
        if kind == "context" and len(args) in (2, 3):
            lo = int(_number(args[0], item, int))
            hi = int(_number(args[1], item, int))
            if hi <= lo:
                raise DriftError(f"drift item {item!r}: HI must be above LO")
            fields["context_lo"], fields["context_hi"] = lo, hi
            if len(args) == 3:
                floor = float(_number(args[2], item, float))
                if floor > 1:
                    raise DriftError(f"drift item {item!r}: FLOOR must be 0..1")
                fields["context_floor"] = floor
        elif kind == "uptime" and len(args) == 1:
            fields["uptime_half_life_s"] = float(_number(args[0], item, float))
        elif kind == "thermal" and len(args) <= 1:
            fields["heat_s"] = float(_number(args[0], item, float)) if args else 120.0
        elif kind == "loop" and len(args) == 1:
            fields["loop_every"] = int(_number(args[0], item, int))
        elif kind == "garble" and len(args) == 1:
            fields["garble_every"] = int(_number(args[0], item, int))
        else:
            raise DriftError(f"bad drift item {item!r} (valid: {DRIFT_SYNTAX})")
    return Drift(**fields)
