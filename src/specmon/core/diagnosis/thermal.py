"""Thermal-normalised speed: is a slow stretch the GPU's clock or the drafter's acceptance?

Decode speed is acceptance length / step time. Per answer we know both (AL from the stream, step
time = decode span / decode steps) and, from the GPU samples taken while it ran, the SM clock,
temperature and power. `StepClockFit` fits step time against 1000 / SM clock (step time of a
compute-bound step is about proportional to the clock period) by least squares over every answer,
in five running sums (fixed size for any session length).

`attribute` compares the latest answers with the fast ones before them (the fastest quarter of the
kept answers) and splits the slowdown in log space: ln(speed_ref / speed_now) = ln(step_now /
step_ref) + ln(AL_ref / AL_now). The fastest quarter of answers whose speed varies with their
content is faster than the rest by chance alone (on a healthy server it is ~15% above the latest
answers, its AL above theirs): so a stretch is slow only when it is also SLOW_FRAC below the median
of the earlier answers, or its clock fell (a GPU that throttles within its first answers leaves few
unthrottled ones, and a median of throttled ones would hide it). The step ratio the clock explains
is the fit's prediction at the two clocks (or the clock ratio when the fit is not usable yet); its
share of the total is the clock's share, ln(AL ratio) / total is acceptance's share, the rest is
"other" (batching, context length, power). Each share is kept within 0..100% (`shares_of`: a clock
that fell further than the speed, while acceptance rose, is 100% of the slowdown, not 150%). Pure:
numbers in, view out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

RECENT_ANSWERS = 5
"""The "now" of an attribution: the latest answers."""
MIN_REFERENCE = 3
"""At least this many earlier answers make the reference."""
SLOW_FRAC = 0.10
"""A stretch is "slow" when its speed is at least this much below the reference, and either at
least this much below the median of the earlier answers or run at a clock at least CLOCK_FELL_FRAC
below the reference's."""
CLOCK_FELL_FRAC = 0.03
"""The GPU clock fell when the latest answers ran at least this much below the reference's clock."""
MIN_FIT_POINTS = 5
MIN_CLOCK_SPREAD_FRAC = 0.03
"""The fit is used once its clocks span at least this fraction of their mean."""
MAX_POINTS = 256
"""Answers kept for attribution (a ring)."""


@dataclass(frozen=True, slots=True)
class AnswerPoint:
    """One finished answer's speed, acceptance and the GPU's state while it ran."""

    t: float
    decode_tok_s: float
    step_s: float
    acceptance_length: float
    sm_clock_mhz: float | None
    temperature_c: float | None
    power_w: float | None


@dataclass(frozen=True, slots=True)
class ClockFitView:
    """step_s ≈ intercept_s + slope_s_per_inv_ghz * (1000 / SM clock MHz), over `points` answers."""

    points: int
    intercept_s: float | None
    slope_s_per_inv_ghz: float | None
    usable: bool


@dataclass(frozen=True, slots=True)
class PowerLimitView:
    """The GPU's power limits: what was requested (set) and what is enforced (effective)."""

    gpu_index: int
    requested_w: float | None
    enforced_w: float | None
    default_w: float | None
    differs: bool
    """Enforced differs from requested (another cap — e.g. the board or a thermal policy — won)."""


@dataclass(frozen=True, slots=True)
class ThermalView:
    """The latest slow stretch's attribution, when there is one."""

    fit: ClockFitView
    answers: int
    slow: bool
    ref_decode_tok_s: float | None = None
    now_decode_tok_s: float | None = None
    ref_clock_mhz: float | None = None
    now_clock_mhz: float | None = None
    now_temperature_c: float | None = None
    ref_acceptance_length: float | None = None
    now_acceptance_length: float | None = None
    clock_share: float | None = None
    acceptance_share: float | None = None
    other_share: float | None = None
    cause: str | None = None
    """"clock", "acceptance" or "other": the largest share."""
    summary: str = ""
    power_limits: tuple[PowerLimitView, ...] = ()


class StepClockFit:
    """Least squares of step time on 1000 / SM clock, as five running sums."""

    __slots__ = ("n", "sx", "sxx", "sxy", "sy", "x_max", "x_min")

    def __init__(self) -> None:
        self.n = 0
        self.sx = self.sy = self.sxx = self.sxy = 0.0
        self.x_min = math.inf
        self.x_max = -math.inf

    def add(self, clock_mhz: float, step_s: float) -> None:
        if not (clock_mhz > 0 and step_s > 0 and math.isfinite(clock_mhz + step_s)):
            return
        x = 1000.0 / clock_mhz
        self.n += 1
        self.sx += x
        self.sy += step_s
        self.sxx += x * x
        self.sxy += x * step_s
        self.x_min = min(self.x_min, x)
        self.x_max = max(self.x_max, x)

    def coefficients(self) -> tuple[float, float] | None:
        """(intercept, slope), or None with fewer than two distinct clocks."""
        den = self.n * self.sxx - self.sx * self.sx
        if self.n < 2 or den <= 1e-12 * max(1.0, self.n * self.sxx):
            return None
        slope = (self.n * self.sxy - self.sx * self.sy) / den
        return (self.sy - slope * self.sx) / self.n, slope

    def usable(self) -> bool:
        coef = self.coefficients()
        if coef is None or self.n < MIN_FIT_POINTS or coef[1] <= 0:
            return False
        mean = self.sx / self.n
        return (self.x_max - self.x_min) / mean >= MIN_CLOCK_SPREAD_FRAC

    def predict(self, clock_mhz: float) -> float | None:
        coef = self.coefficients()
        if coef is None:
            return None
        return coef[0] + coef[1] * 1000.0 / clock_mhz

    def view(self) -> ClockFitView:
        coef = self.coefficients()
        return ClockFitView(
            points=self.n,
            intercept_s=coef[0] if coef else None,
            slope_s_per_inv_ghz=coef[1] if coef else None,
            usable=self.usable(),
        )


def gpu_during(
    samples: Iterable[tuple[float, float | None, float | None, float | None]],
    t0: float,
    t1: float,
) -> tuple[float | None, float | None, float | None]:
    """(mean SM clock, max temperature, mean power) of the samples (t, temperature °C, power W,
    SM clock MHz) taken in [t0, t1]; when none fell inside, the last one before t1."""
    clocks: list[float] = []
    temps: list[float] = []
    powers: list[float] = []
    last: tuple[float, float | None, float | None, float | None] | None = None
    for s in samples:
        t = s[0]
        if t <= t1:
            last = s
        if t0 <= t <= t1:
            if s[3] is not None:
                clocks.append(s[3])
            if s[1] is not None:
                temps.append(s[1])
            if s[2] is not None:
                powers.append(s[2])
    if not clocks and not temps and last is not None:
        clocks = [last[3]] if last[3] is not None else []
        temps = [last[1]] if last[1] is not None else []
        powers = [last[2]] if last[2] is not None else []
    return (
        sum(clocks) / len(clocks) if clocks else None,
        max(temps) if temps else None,
        sum(powers) / len(powers) if powers else None,
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def shares_of(clock: float, acceptance: float) -> tuple[float, float, float]:
    """(clock, acceptance, other) shares of a slowdown, each 0..1 and summing to 1, from the raw
    log-space ratios. A part can pass the whole (the clock fell further than the speed while
    acceptance rose: 150% and -50%); it is shown as all of it (100%, 0%), never above 100% or
    below 0%; two parts that together pass the whole are scaled to it."""
    clock, acceptance = (min(1.0, max(0.0, x)) for x in (clock, acceptance))
    both = clock + acceptance
    if both > 1.0:
        clock, acceptance = clock / both, acceptance / both
    return clock, acceptance, max(0.0, 1.0 - clock - acceptance)


def attribute(
    points: Sequence[AnswerPoint],
    fit: StepClockFit,
    power_limits: tuple[PowerLimitView, ...] = (),
) -> ThermalView:
    """Attribute the latest answers' slowdown against the fast earlier ones (module text)."""
    fit_view = fit.view()
    base = ThermalView(fit=fit_view, answers=len(points), slow=False, power_limits=power_limits)
    if len(points) < RECENT_ANSWERS + MIN_REFERENCE:
        return base
    now = points[-RECENT_ANSWERS:]
    earlier = sorted(points[:-RECENT_ANSWERS], key=lambda p: p.decode_tok_s, reverse=True)
    ref = earlier[: max(MIN_REFERENCE, len(earlier) // 4)]
    ref_speed = _mean([p.decode_tok_s for p in ref])
    now_speed = _mean([p.decode_tok_s for p in now])
    ref_al = _mean([p.acceptance_length for p in ref])
    now_al = _mean([p.acceptance_length for p in now])
    assert ref_speed is not None and now_speed is not None and ref_al and now_al
    ref_clock = _mean([p.sm_clock_mhz for p in ref if p.sm_clock_mhz is not None])
    now_clock = _mean([p.sm_clock_mhz for p in now if p.sm_clock_mhz is not None])
    temps = [p.temperature_c for p in now if p.temperature_c is not None]
    now_temp = max(temps) if temps else None
    numbers = ThermalView(
        fit=fit_view,
        answers=len(points),
        slow=False,
        ref_decode_tok_s=ref_speed,
        now_decode_tok_s=now_speed,
        ref_clock_mhz=ref_clock,
        now_clock_mhz=now_clock,
        now_temperature_c=now_temp,
        ref_acceptance_length=ref_al,
        now_acceptance_length=now_al,
        power_limits=power_limits,
    )
    if now_speed <= 0 or ref_speed < now_speed * (1 + SLOW_FRAC):
        return numbers
    typical = statistics.median(p.decode_tok_s for p in earlier)
    clock_fell = bool(ref_clock and now_clock and now_clock <= ref_clock * (1 - CLOCK_FELL_FRAC))
    if typical < now_speed * (1 + SLOW_FRAC) and not clock_fell:
        return numbers  # the fastest quarter is fast by chance: no slower than usual
    total = math.log(ref_speed / now_speed)
    al_part = math.log(ref_al / now_al)
    clock_part = 0.0
    if ref_clock and now_clock:
        predicted_ref = fit.predict(ref_clock) if fit.usable() else None
        predicted_now = fit.predict(now_clock) if fit.usable() else None
        if predicted_ref and predicted_now and predicted_ref > 0 and predicted_now > 0:
            clock_part = math.log(predicted_now / predicted_ref)
        else:
            clock_part = math.log(ref_clock / now_clock)
    clock_share, al_share, other = shares_of(clock_part / total, al_part / total)
    shares = {"clock": clock_share, "acceptance": al_share, "other": other}
    cause = max(shares, key=lambda k: shares[k])
    if cause == "clock" and ref_clock and now_clock:
        temp = f" at {now_temp:.0f} °C" if now_temp is not None else ""
        summary = (
            f"the GPU clock fell {ref_clock:.0f}→{now_clock:.0f} MHz{temp} "
            f"({clock_share:.0%} of the slowdown; acceptance {al_share:.0%})"
        )
    elif cause == "acceptance":
        summary = (
            f"acceptance fell {ref_al:.2f}→{now_al:.2f} "
            f"({al_share:.0%} of the slowdown; GPU clock {clock_share:.0%})"
        )
    else:
        summary = (
            f"{ref_speed:.0f}→{now_speed:.0f} tok/s, not from the GPU clock ({clock_share:.0%}) "
            f"or acceptance ({al_share:.0%}): batching, context length or power?"
        )
    return replace(
        numbers,
        slow=True,
        clock_share=clock_share,
        acceptance_share=al_share,
        other_share=other,
        cause=cause,
        summary=summary,
    )
