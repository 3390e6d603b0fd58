"""Clock-event ("throttle") reasons: the bitmask NVML and dcgm-exporter report, decoded to words.

NVML's `nvmlDeviceGetCurrentClocksEventReasons` (older name: `...ClocksThrottleReasons`) and
dcgm-exporter's `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` (older: `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`)
share one bit layout, so both GPU paths decode through this module. Pure: no NVML here.
"""

from __future__ import annotations

import math

CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
"""Each known bit and its word, in bit order (NVML's nvmlClocksEventReason* constants)."""

_KNOWN_MASK = 0
for _bit, _ in CLOCK_EVENT_BITS:
    _KNOWN_MASK |= _bit

THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
"""Reasons that mean the GPU slowed down because it is hot."""

POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
"""Reasons that mean the GPU slowed down to stay within its power limit (or a power brake)."""

SLOWDOWN_REASONS = THERMAL_REASONS | POWER_REASONS | {"hw_slowdown"}
"""Reasons that cost speed against the load's wish (idle, sync boost and app clocks do not)."""


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """The words for every bit set in `mask`, in bit order; () when none is set.

    A bit that NVML has no name for (a newer driver) becomes `unknown_0x…` rather than vanishing.
    A negative mask is not a bitmask and raises ValueError.
    """
    if mask < 0:
        raise ValueError(f"a clock-event reason mask cannot be negative ({mask})")
    words = [word for bit, word in CLOCK_EVENT_BITS if mask & bit]
    rest = mask & ~_KNOWN_MASK
    bit = 1
    while rest:
        if rest & bit:
            words.append(f"unknown_0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return tuple(words)


def mask_from_float(value: float) -> int | None:
    """A bitmask from a Prometheus sample value, or None when it cannot be one.

    dcgm-exporter prints the mask as a float; a negative, fractional, infinite or NaN value is
    not a mask.
    """
    if not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)
