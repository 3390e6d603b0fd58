"""Presentation rules shared by every specmon screen (the Textual app and `watch --once`'s Rich
text): number formats, the dash for missing numbers, the one truncation rule (`shorten`: a cut text
ends in "…"), untrusted text made safe (`visible` for the app,
`clean` for the console and plain lines), the verdict's words, status words and colours, and
labels for acceptance sources and for window vs since-start numbers.

The number fields (`fit`, out of range past their width), the dash and the text sanitisers are
core's (`core.display_text`, shared with bench's reports and exports) and re-exported here.

Plain strings only: no Rich, no Textual, so any renderer can use them. WHICH acceptance to show
is a measurement rule and lives in core (`core.views.choose_acceptance`, exposed as
`RequestRow.acceptance`); this module only says how to write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specmon.core.display_text import (
    DASH,
    ELLIPSIS,
    GIB,
    MAX_NUMBER_CHARS,
    cell_width,
    clean,
    fit,
    fmt,
    fmt_al,
    fmt_count,
    fmt_field,
    fmt_frac_pct,
    fmt_gib,
    fmt_rates,
    fmt_seconds,
    fmt_tok_s,
    out_of_range,
    shorten,
    visible,
    visible_line,
)
from specmon.core.events import GpuReading
from specmon.core.verdict import request_verdict
from specmon.core.views import Acceptance, AcceptanceSource, CycleView, RequestRow

__all__ = [  # core.display_text's plain-text rules, handed on to the ui (the rest is public too)
    "DASH",
    "ELLIPSIS",
    "GIB",
    "MAX_NUMBER_CHARS",
    "cell_width",
    "clean",
    "fit",
    "fmt",
    "fmt_al",
    "fmt_count",
    "fmt_field",
    "fmt_frac_pct",
    "fmt_gib",
    "fmt_rates",
    "fmt_seconds",
    "fmt_tok_s",
    "out_of_range",
    "shorten",
    "visible",
    "visible_line",
]

SIMULATED_BANNER = " SIMULATED — numbers from specmon's built-in simulator, not a real GPU "
SIMULATED_PREFIX = "[SIMULATED] "

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


VERDICT_WORDS = {
    "vanilla-speed": "VANILLA SPEED",
    "transition": "TRANSITION",
    "loop": "LOOP",
    "garbled": "GARBLED",
}
"""A flagged verdict in the answers table's words."""


def flag_words(row: RequestRow) -> FlagWords:
    """The flag of a request (its verdict, core.verdict): failed/cancelled with the error,
    LOOP, GARBLED, VANILLA SPEED or TRANSITION with its reasons, ok, or — (not judged, or still
    running). Untrusted text is cleaned."""
    v = request_verdict(row)
    if v.kind in ("failed", "cancelled"):
        return FlagWords("failed", clean(f"{v.kind}: {v.error or ''}"))
    if v.flagged:
        words = VERDICT_WORDS.get(v.kind, v.kind.upper())
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
