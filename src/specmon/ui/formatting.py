"""Presentation rules shared by every specmon screen (the Rich console now, the Textual app next):
number formats, the dash for missing numbers, safe text, the vanilla-speed flag's words, status
words, and labels for acceptance sources and for window vs since-start numbers.

Plain strings only: no Rich, no Textual, so any renderer can use them. WHICH acceptance to show
is a measurement rule and lives in core (`core.views.choose_acceptance`, exposed as
`RequestRow.acceptance`); this module only says how to write it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from specmon.core.events import GpuReading
from specmon.core.views import Acceptance, AcceptanceSource, RequestRow

DASH = "—"
"""What a missing number is shown as (never 0)."""

GIB = 1024**3

SIMULATED_BANNER = " SIMULATED — numbers from specmon's built-in simulator, not a real GPU "
SIMULATED_PREFIX = "[SIMULATED] "

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"[\t\n]+")


def clean(text: str, *, multiline: bool = False) -> str:
    """Text safe to print: control characters (escape sequences, bidi overrides) removed, and,
    unless `multiline`, tabs and newlines turned into spaces so one field stays one line (a
    server's error text cannot forge lines of its own in the output)."""
    text = _CONTROL.sub("", text)
    return text if multiline else _LINE_BREAKS.sub(" ", text)


def fmt(value: float | int | None, spec: str = ".1f", unit: str = "") -> str:
    """A number formatted, or — when missing (never 0 for missing)."""
    if value is None or isinstance(value, bool):
        return DASH
    try:
        return f"{value:{spec}}{unit}"
    except (TypeError, ValueError):
        return DASH


def fmt_tok_s(value: float | None) -> str:
    """Tokens per second, one decimal."""
    return fmt(value, ".1f")


def fmt_al(value: float | None) -> str:
    """An acceptance length, two decimals."""
    return fmt(value, ".2f")


def fmt_seconds(value: float | None) -> str:
    """Seconds with millisecond resolution (TTFT, ITL)."""
    return fmt(value, ".3f")


def fmt_frac_pct(value: float | None) -> str:
    """A 0..1 fraction as a whole percentage ("45%")."""
    return fmt(value * 100 if value is not None else None, ".0f", "%")


def fmt_rates(rates: tuple[float, ...] | None, limit: int = 8) -> str:
    """Per-position rates, two decimals each, the first `limit` positions."""
    return " ".join(f"{r:.2f}" for r in rates[:limit]) if rates else DASH


def fmt_gib(value: int | None) -> str:
    return fmt(value / GIB if value is not None else None)


def fmt_count(value: float | int | None) -> str:
    """A token or draft count, whole, with thousands separators."""
    return fmt(value, ",.0f")


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
    "stale": "yellow",
    "down": "red",
    "unreadable": "red",
}


def flag_words(row: RequestRow) -> FlagWords:
    """The flag of a request: failed/cancelled with the error, VANILLA SPEED with its reasons,
    ok, or — (not judged, or still running). Untrusted text is cleaned."""
    if row.outcome != "ok":
        return FlagWords("failed", clean(f"{row.outcome}: {row.error or ''}"))
    v = row.vanilla
    if v is None:
        return FlagWords("unknown", DASH)
    if v.flagged:
        reasons = "; ".join(clean(text or code) for code, text in v.reasons)
        return FlagWords("flagged", "VANILLA SPEED: " + reasons)
    return FlagWords("ok", "ok") if v.judged else FlagWords("unknown", DASH)


def status_word(status: str | None) -> str:
    return status or "connecting"


def gpu_text(g: GpuReading) -> str:
    """One GPU's readings on one line: temperature (and its slowdown threshold), power, VRAM,
    clocks, utilisation; — for every reading that is not available. Cleaned."""
    vram = f"{fmt_gib(g.memory_used_bytes)}/{fmt_gib(g.memory_total_bytes)} GiB"
    temp = fmt(g.temperature_c, ".0f", " °C")
    if g.slowdown_temperature_c is not None:
        temp += f" (slowdown {g.slowdown_temperature_c:.0f})"
    return clean(
        f"GPU {g.index} {g.name or ''}: {temp}  "
        f"{fmt(g.power_w, '.0f')}/{fmt(g.power_limit_w, '.0f')} W  VRAM {vram}  "
        f"SM {fmt(g.sm_clock_mhz, '.0f')} MHz  "
        f"mem {fmt(g.memory_clock_mhz, '.0f')} MHz  "
        f"util {fmt(g.utilization_pct, '.0f', '%')}"
    )


def gpu_throttle_text(g: GpuReading) -> str | None:
    """The clock-event reasons in force ("clocks held by: …"), idle left out; None when none."""
    reasons = [r for r in g.clock_event_reasons or () if r != "gpu_idle"]
    return clean("clocks held by: " + ", ".join(reasons)) if reasons else None
