"""Presentation rules shared by every specmon screen (the Textual app and `watch`'s Rich console):
number formats, the dash for missing numbers, untrusted text made safe (`visible` for the app,
`clean` for the console and plain lines), the verdict's words, status words and colours, and
labels for acceptance sources and for window vs since-start numbers.

Every number has a field width (`fit`): a value too wide for it is written as out of range
(">1e6", "<-1e5"), never as 309 digits, and an infinite one likewise (no "inf").

Plain strings only: no Rich, no Textual, so any renderer can use them. WHICH acceptance to show
is a measurement rule and lives in core (`core.views.choose_acceptance`, exposed as
`RequestRow.acceptance`); this module only says how to write it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from specmon.core.events import GpuReading
from specmon.core.verdict import request_verdict
from specmon.core.views import Acceptance, AcceptanceSource, CycleView, RequestRow
from specmon.core.visible_text import visible as visible

DASH = "—"
"""What a missing number is shown as (never 0)."""

GIB = 1024**3

SIMULATED_BANNER = " SIMULATED — numbers from specmon's built-in simulator, not a real GPU "
SIMULATED_PREFIX = "[SIMULATED] "


def visible_line(text: str | None) -> str:
    """Untrusted text on one line (model names, errors): runs of whitespace folded to one
    space, control characters made visible; — when missing."""
    return visible(" ".join((text or DASH).split()))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"[\t\n]+")


def clean(text: str, *, multiline: bool = False) -> str:
    """Text safe to print where nothing can stand in for a character (the Rich console, plain
    lines, files): control characters (escape sequences, bidi overrides) removed, and,
    unless `multiline`, tabs and newlines turned into spaces so one field stays one line (a
    server's error text cannot forge lines of its own in the output)."""
    text = _CONTROL.sub("", text)
    return text if multiline else _LINE_BREAKS.sub(" ", text)


MAX_NUMBER_CHARS = 15
"""Widest number any field shows ("999,999,999,999"); wider ones are written as out of range."""


def _bound(spec: str, width: int, unit: str, negative: bool) -> int:
    """The smallest power of ten whose text in `spec` (with the sign and unit) is wider than
    `width`: every value written in `width` characters is below 10 ** that."""
    for digits in range(1, 400):
        try:
            text = format((-1.0 if negative else 1.0) * 10.0**digits, spec) + unit
        except OverflowError:
            return digits
        if len(text) > width:
            return digits
    return 400


def out_of_range(value: float, spec: str, width: int, unit: str = "") -> str:
    """What a number too wide for its field shows: ">1e6" (above the widest value the field
    holds), "<-1e5" below, or "<0" where even that does not fit; never wider than the field
    once the field has 4 characters."""
    if value > 0:
        return f">1e{_bound(spec, width, unit, negative=False)}{unit}"[: max(width, 4)]
    marker = f"<-1e{_bound(spec, width, unit, negative=True)}"
    for text in (marker + unit, marker):
        if len(text) <= width:
            return text
    return "<0"


def fit(value: float | int | None, spec: str, width: int, unit: str = "") -> str:
    """A number formatted in at most `width` characters: — when missing (never 0 for missing),
    the number when it fits, else `out_of_range` (an infinite value is out of range; NaN is
    not a number and shows —). A 309-digit gauge never spreads a row over several lines."""
    if value is None or isinstance(value, bool):
        return DASH
    if isinstance(value, float) and value != value:
        return DASH
    try:
        text = f"{value:{spec}}{unit}"
    except (TypeError, ValueError):
        return DASH
    if len(text) <= width and text.lower().lstrip("-") not in ("inf", "inf" + unit.lower()):
        return text
    return out_of_range(float(value), spec, width, unit)


def fmt_field(value: float | int | None, spec: str, width: int = 0) -> str:
    """A number right-aligned in a fixed field of `width` characters (`fit`; — when missing),
    so a column never moves; without a width, as wide as it is (`fmt`)."""
    if not width:
        return fmt(value, spec)
    return fit(value, spec, width).rjust(width)


def fmt(
    value: float | int | None, spec: str = ".1f", unit: str = "", width: int = MAX_NUMBER_CHARS
) -> str:
    """A number formatted, or — when missing (never 0 for missing); out of range past `width`
    characters (`fit`)."""
    return fit(value, spec, width, unit)


def fmt_tok_s(value: float | None) -> str:
    """Tokens per second, one decimal (out of range from 10 million)."""
    return fit(value, ".1f", 9)


def fmt_al(value: float | None) -> str:
    """An acceptance length, two decimals (out of range from 10,000)."""
    return fit(value, ".2f", 7)


def fmt_seconds(value: float | None) -> str:
    """Seconds with millisecond resolution (TTFT, ITL; out of range from a million)."""
    return fit(value, ".3f", 10)


def fmt_frac_pct(value: float | None) -> str:
    """A 0..1 fraction as a whole percentage ("45%"; out of range from 100,000%)."""
    return fit(value * 100 if value is not None else None, ".0f", 6, "%")


def fmt_rates(rates: tuple[float, ...] | None, limit: int = 8) -> str:
    """Per-position rates, two decimals each, the first `limit` positions (each out of range
    from 100)."""
    return " ".join(fit(r, ".2f", 5) for r in rates[:limit]) if rates else DASH


def fmt_gib(value: int | None) -> str:
    return fmt(value / GIB if value is not None else None, width=9)


def fmt_count(value: float | int | None) -> str:
    """A token or draft count, whole, with thousands separators (out of range from 10**15)."""
    return fit(value, ",.0f", 19)


SOURCE_WORDS: dict[AcceptanceSource, str] = {
    "server": "server",
    "chunks": "chunks",
    "metrics": "/metrics",
}
"""How each acceptance source is named on screen."""


def fmt_acceptance(a: Acceptance | None, *, with_source: bool = True) -> str:
    """An acceptance length with its source: "2.60 server", "3.10 chunks", or —."""
    if a is None or a.acceptance_length is None:
        return DASH
    text = fmt_al(a.acceptance_length)
    return f"{text} {SOURCE_WORDS[a.source]}" if with_source else text


WINDOW_LABEL = "window"
"""Label of numbers from counter deltas over the recent window."""


def lifetime_label(since_reset_t: float | None) -> str:
    """Label of since-start numbers: since the server started, or since its last counter reset."""
    if since_reset_t is None:
        return "since start"
    return f"since reset at {since_reset_t:.0f} s"


FlagKind = Literal["failed", "flagged", "ok", "unknown"]


@dataclass(frozen=True, slots=True)
class FlagWords:
    """What a request's flag cell says: kind (for colour) and the words."""

    kind: FlagKind
    text: str


FLAG_STYLES: dict[FlagKind, str] = {
    "failed": "red",
    "flagged": "bold yellow",
    "ok": "green",
    "unknown": "",
}
"""Colour of each flag kind (Rich/Textual style words)."""

STATUS_STYLES: dict[str, str] = {
    "up": "green",
    "restarted": "bold cyan",
    "stale": "yellow",
    "down": "bold red",
    "unreadable": "bold red",
    "connecting": "dim",
}
"""Colour of each server state (the servers table, the panel, `watch`'s console)."""


def flag_words(row: RequestRow) -> FlagWords:
    """The flag of a request (its verdict, core.verdict): failed/cancelled with the error,
    VANILLA SPEED or TRANSITION with its reasons, ok, or — (not judged, or still running).
    Untrusted text is cleaned."""
    v = request_verdict(row)
    if v.kind in ("failed", "cancelled"):
        return FlagWords("failed", clean(f"{v.kind}: {v.error or ''}"))
    if v.flagged:
        words = "VANILLA SPEED" if v.kind == "vanilla-speed" else "TRANSITION"
        return FlagWords("flagged", f"{words}: " + "; ".join(clean(t) for t in v.sentences))
    return FlagWords("ok", "ok") if v.kind == "ok" else FlagWords("unknown", DASH)


def status_word(status: str | None) -> str:
    return status or "connecting"


def gpu_text(g: GpuReading) -> str:
    """One GPU's readings on one line: temperature (and its slowdown threshold), power, VRAM,
    clocks, utilisation; — for every reading that is not available. Cleaned."""
    vram = f"{fmt_gib(g.memory_used_bytes)}/{fmt_gib(g.memory_total_bytes)} GiB"
    temp = fmt(g.temperature_c, ".0f", " °C", width=9)
    if g.slowdown_temperature_c is not None:
        temp += f" (slowdown {fmt(g.slowdown_temperature_c, '.0f', width=6)})"
    return clean(
        f"GPU {g.index} {g.name or ''}: {temp}  "
        f"{fmt(g.power_w, '.0f', width=7)}/{fmt(g.power_limit_w, '.0f', width=7)} W  "
        f"VRAM {vram}  SM {fmt(g.sm_clock_mhz, '.0f', width=7)} MHz  "
        f"mem {fmt(g.memory_clock_mhz, '.0f', width=7)} MHz  "
        f"util {fmt(g.utilization_pct, '.0f', '%', width=6)}"
    )


def gpu_throttle_text(g: GpuReading) -> str | None:
    """The clock-event reasons in force ("clocks held by: …"), idle left out; None when none."""
    reasons = [r for r in g.clock_event_reasons or () if r != "gpu_idle"]
    return clean("clocks held by: " + ", ".join(reasons)) if reasons else None


def cycle_text(c: CycleView | None) -> str | None:
    """The cycle report in one line, e.g. "every 9-10 requests, 3 degraded, long-run 161 vs 221
    tok/s"; None when no cycle is detected."""
    if c is None or not c.detected:
        return None
    lo, hi = c.period_min or c.period, c.period_max or c.period
    every = f"every {lo} requests" if lo == hi else f"every {lo}-{hi} requests"
    degraded = c.degraded_per_cycle
    parts = [every]
    if degraded is not None:
        parts.append(f"{degraded:.0f} degraded")
    parts.append(
        f"long-run {fmt(c.long_run_mean_tok_s, '.0f')} vs {fmt(c.fast_mean_tok_s, '.0f')} tok/s"
    )
    return ", ".join(parts)
