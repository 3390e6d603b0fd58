"""The dashboard: the side panel of `specmon chat` / `specmon demo`, and `specmon watch`'s screen.

Everything shown is read from the typed view (`core.views.SessionView`) and the current answer's
numbers; nothing here does I/O. Numbers are refreshed at ~4 Hz; the graphs draw the last minute
of the server's one history (`ServerView.history`, a point a scrape) by time. Graph scales are
fixed (AL 1..K+1, rates 0..1), never fitted to the data, so noise never looks like a change.
Missing values are —. Numbers sit in fixed-width fields so nothing jumps.

The text of each section is built by pure functions (`panel_sections`), tested without an app.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from specmon.core.events import GpuReading
from specmon.core.histogram_quantiles import choose_latency
from specmon.core.position_worth import ServerPositionWorth, TrimHint, server_position_worth
from specmon.core.redaction import redact_url
from specmon.core.server_window import others_traffic, window_vanilla
from specmon.core.views import CycleView, ServerView, SessionView
from specmon.ui.answer_numbers import AnswerNumbers
from specmon.ui.formatting import (
    DASH,
    GIB,
    MAX_NUMBER_CHARS,
    cycle_text,
    fit,
    fmt_field,
    shorten,
    visible,
    visible_line,
)
from specmon.ui.servers_text import live_numbers
from specmon.ui.styles import CONSOLE_STYLES, Styles, theme_styles
from specmon.ui.widgets.diagnosis_panel import DiagnosisSection

GRAPH_SECONDS = 60
"""The graphs show the last minute of the server's history (`ServerView.history`), by time."""
GRAPH_WIDTH = 20
"""Characters per graph: 3 seconds a character."""
BAR_WIDTH = 8
"""Characters of one per-position acceptance bar."""
LEVELS = "▁▂▃▄▅▆▇█"
GPU_NAME_CELLS = 44
"""Cells of a GPU's name ("simulated NVIDIA GeForce RTX 5090 Laptop GPU" whole); a longer one
is cut with … (`shorten`), and the section's width may cut it further, the same way."""
DETAIL_CELLS = 80
"""Cells of a server's last error under its status (cut with …)."""

REASON_WORDS: dict[str, str] = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "hardware slowdown",
    "sw_thermal_slowdown": "thermal (software)",
    "hw_thermal_slowdown": "thermal (hardware)",
    "hw_power_brake_slowdown": "power brake",
    "applications_clocks_setting": "application clocks",
    "sync_boost": "sync boost",
    "display_clock_setting": "display clock",
    "board_limit": "board limit",
    "reliability": "reliability",
}
"""Clock-event reason codes (core.gpu_reasons) in words; idle is not a throttle and is left out."""


HOLD_SCRAPES = 3
"""A point stands for the time after it up to the next one when that comes within this many
typical scrape intervals (the median spacing of the points): scrapes further apart than a graph
character (3 s) draw a continuous line, and only a longer gap (a server stale or down: the
scraper calls it stale after 3 missed intervals) is blank."""


def spark(
    t: Sequence[float],
    values: Sequence[float | None],
    now: float,
    lo: float,
    hi: float,
    width: int = GRAPH_WIDTH,
) -> str:
    """A sparkline of a history (`t` and `values` parallel, oldest first) over the last
    GRAPH_SECONDS before `now`, on the FIXED scale lo..hi, `width` characters, the newest at the
    right. Character i covers an equal slice of time (3 s at 20 characters) and shows the mean of
    the values whose time falls in it; a slice with none shows the latest earlier value while that
    still stands (HOLD_SCRAPES), else a space: a gap with no scrape (the server down, or not yet
    watched) is blank. A point with no value (None) shows nothing. Values outside the scale are
    clipped to it."""
    start = now - GRAPH_SECONDS
    first = bisect.bisect_right(t, start)
    stop = bisect.bisect_right(t, now)
    lead = max(0, first - 1)  # the last point before the graph, which may stand into it
    times, vals = t[lead:stop], values[lead:stop]
    gaps = sorted(b - a for a, b in itertools.pairwise(t[lead : stop + 1]))
    hold = HOLD_SCRAPES * gaps[len(gaps) // 2] if gaps else 0.0
    per = GRAPH_SECONDS / width
    sums = [0.0] * width
    counts = [0] * width
    for when, value in zip(times, vals, strict=False):
        if value is not None and when > start:
            slot = min(width - 1, max(0, math.ceil((when - start) / per) - 1))
            sums[slot] += value
            counts[slot] += 1
    chars: list[str] = []
    j = -1  # the latest point at or before this slice's start
    for i in range(width):
        if hi <= lo:
            chars.append(" ")
            continue
        if counts[i]:
            mean: float | None = sums[i] / counts[i]
        else:
            slice_start = start + i * per
            while j + 1 < len(times) and times[j + 1] <= slice_start:
                j += 1
            mean = None
            if j >= 0:
                ends = t[lead + j + 1] if lead + j + 1 < len(t) else now
                if ends - times[j] <= hold and slice_start - times[j] < hold:
                    mean = vals[j] if j < len(vals) else None
        if mean is None:
            chars.append(" ")
            continue
        frac = min(1.0, max(0.0, (mean - lo) / (hi - lo)))
        chars.append(LEVELS[min(len(LEVELS) - 1, int(frac * len(LEVELS)))])
    return "".join(chars)


def bar(frac: float | None, width: int = BAR_WIDTH) -> str:
    """A horizontal bar for a 0..1 share, in eighths; blank when missing."""
    if frac is None:
        return " " * width
    eighths = round(min(1.0, max(0.0, frac)) * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    return text.ljust(width, "░")[:width]


def _t(text: str, style: str = "") -> Text:
    return Text(text, style=style)


def server_section(
    view: SessionView, server: ServerView | None, *, styles: Styles = CONSOLE_STYLES
) -> Text:
    info = view.info
    if server is not None and len(view.servers) > 1 and info.server not in (None, server.source):
        # The session's identity (model, draft, version) is its first server's: another server
        # shows its own address, model and version (what it answered) and its /metrics' n_spec.
        info = replace(
            info,
            model=server.model,
            draft_model=None,
            method=None,
            vllm_version=server.vllm_version,
        )
    status = server.status if server and server.status else "connecting"
    out = Text()
    out.append("● ", style=styles.status(status))
    out.append(f"{status:<10}", style=styles.status(status))
    out.append(f" vLLM {visible_line(info.vllm_version)}")
    if view.simulated:
        out.append("  SIMULATED", style=f"bold reverse {styles.warning}")
    if server and server.status in ("stale", "down", "unreadable") and server.status_detail:
        detail = shorten(visible_line(server.status_detail), DETAIL_CELLS)
        out.append("\n  " + detail, style=styles.error)
    # The server's address near the top (without credentials): the header cuts it at 80 columns.
    url = redact_url(server.source if server is not None else view.info.server)
    out.append(f"\nurl    {visible_line(url)}")
    n_spec = server.n_spec if server and server.n_spec is not None else info.n_spec
    out.append(f"\nmodel  {visible_line(info.model)}")
    out.append(f"\ndraft  {visible_line(info.draft_model)}")
    out.append(f"\nmethod {visible_line(info.method)} · n_spec {fmt_field(n_spec, 'd')}")
    if view.simulated and (info.method or info.draft_model):
        out.append("  (simulator's)", style="dim")  # a simulator profile's, not a server's
    return out


def speed_section(server: ServerView | None, answer: AnswerNumbers | None) -> Text:
    server_tok_s = server.window.decode_tok_s if server else None
    answer_tok_s = answer.decode_tok_s if answer else None
    return _t(
        f"tok/s  server {fmt_field(server_tok_s, '.1f', 7)}   "
        f"this answer {fmt_field(answer_tok_s, '.1f', 7)}"
    )


def acceptance_section(
    view: SessionView,
    server: ServerView | None,
    now: float | None = None,
    *,
    styles: Styles = CONSOLE_STYLES,
) -> Text:
    """AL and draft acceptance, window and since start, with their graphs of the last minute
    of the server's history before `now` (default: the view's instant)."""
    n_spec = server.n_spec if server and server.n_spec is not None else view.info.n_spec
    top = float(n_spec + 1) if n_spec else 2.0
    w = server.window if server else None
    life = server.lifetime if server else None
    label = "since start"
    if life is not None and life.since_reset_t is not None:
        label = f"since reset {life.since_reset_t:.0f}s"
    out = Text()
    out.append(f"{'':6}{'window':<{GRAPH_WIDTH}} {label}\n", style="dim")
    out.append(f"AL    {fmt_field(w.acceptance_length if w else None, '.2f', 6)}")
    out.append(" " * (GRAPH_WIDTH - 5))
    out.append(f"{fmt_field(life.acceptance_length if life else None, '.2f', 6)}\n")
    out.append(f"1-{top:<4.0f}", style="dim")
    h = server.history if server else None
    t: tuple[float, ...] = h.t if h else ()
    edge = now if now is not None else view.t if view.t is not None else (t[-1] if t else 0.0)

    def graph(values: tuple[float | None, ...] | None, lo: float, hi: float) -> str:
        return spark(t, values or (), edge, lo, hi)

    out.append(graph(h.acceptance_length if h else None, 1.0, top), style=styles.accent)
    out.append(" ")
    out.append(graph(h.acceptance_length_lifetime if h else None, 1.0, top), style=styles.other)
    out.append(f"\nrate  {_pct_field(w.draft_acceptance_rate if w else None, 6)}")
    out.append(" " * (GRAPH_WIDTH - 5))
    out.append(f"{_pct_field(life.draft_acceptance_rate if life else None, 7)}\n")
    out.append("0-1   ", style="dim")
    out.append(graph(h.draft_acceptance_rate if h else None, 0.0, 1.0), style=styles.accent)
    out.append(" ")
    out.append(graph(h.draft_acceptance_rate_lifetime if h else None, 0.0, 1.0), style=styles.other)
    return out


def _pct(frac: float | None) -> float | None:
    return None if frac is None else frac * 100


def _pct_field(frac: float | None, width: int = 0) -> str:
    """A 0..1 share as a whole percentage ("29%"), right-aligned in `width` characters; — (no
    "%") when missing."""
    return fit(_pct(frac), ".0f", width or MAX_NUMBER_CHARS, "%").rjust(width)


def positions_section(
    server: ServerView | None, n_spec: int | None, *, styles: Styles = CONSOLE_STYLES
) -> Text:
    """Per-position acceptance (window, else since start), two columns of bars."""
    rates: tuple[float, ...] | None = None
    which = "window"
    if server is not None:
        rates = server.window.per_position_rates
        if not rates and server.lifetime is not None:
            rates, which = server.lifetime.per_position_rates, "since start"
    k = len(rates) if rates else (n_spec or 0)
    out = Text(f"per-position acceptance ({which})", style="dim")
    if k == 0:
        out.append(f"\n{DASH}")
        return out
    half = -(-k // 2)
    for row in range(half):
        out.append("\n")
        for i in (row, row + half):
            if i >= k:
                continue
            r = rates[i] if rates and i < len(rates) else None
            out.append(f"{i + 1:>2} ")
            out.append(bar(r), style=styles.ok)
            out.append(f" {fmt_field(r, '.2f', 4)}   ")
    return out + hint_line(server, styles=styles)


PANEL_SOURCE_WORDS = {"streams": "  (this client)", "histograms": "  (server histograms)"}


def load_section(view: SessionView, server: ServerView | None) -> Text:
    p = choose_latency(view, server)  # this client's streams, else the server's histograms

    def ms(value: float | None) -> str:
        return fmt_field(None if value is None else value * 1000, ".0f", 6)

    kv = _pct(server.kv_cache_usage_frac) if server else None
    running = server.requests_running if server else None
    waiting = server.requests_waiting if server else None
    return _t(
        f"running {fmt_field(running, '.0f', 3)}  waiting {fmt_field(waiting, '.0f', 3)}  "
        f"KV {fmt_field(kv, '.0f', 3)}%\n"
        f"{'ms':<5}{'p50':>7}{'p95':>7}{'p99':>7}{PANEL_SOURCE_WORDS.get(p.source or '', '')}\n"
        f"TTFT {ms(p.ttft_s.p50)} {ms(p.ttft_s.p95)} {ms(p.ttft_s.p99)}\n"
        f"ITL  {ms(p.itl_s.p50)} {ms(p.itl_s.p95)} {ms(p.itl_s.p99)}"
    )


def throttle_words(g: GpuReading) -> str:
    reasons = [r for r in g.clock_event_reasons or () if r != "gpu_idle"]
    if g.clock_event_reasons is None:
        return DASH
    return ", ".join(REASON_WORDS.get(r, r) for r in reasons) if reasons else "none"


def gpu_section(view: SessionView, *, styles: Styles = CONSOLE_STYLES) -> Text:
    gpu = view.gpu
    if not gpu.gpus:
        why = gpu.error or ("no GPU source (--gpu none)" if gpu.source is None else "no reading")
        if view.simulated and gpu.source is None:
            why = "simulated server, no GPU source"
        why = visible_line(why)
        if why.lower().startswith("no gpu:"):
            why = why[len("no gpu:") :].strip()
        return _t(f"no GPU: {why}", "dim")
    out = Text()
    for n, g in enumerate(gpu.gpus):
        if n:
            out.append("\n")
        hot = (
            g.temperature_c is not None
            and g.slowdown_temperature_c is not None
            and g.temperature_c >= g.slowdown_temperature_c - 5
        )
        out.append(f"GPU {g.index} {shorten(visible_line(g.name), GPU_NAME_CELLS)}\n")
        out.append(
            f"temp {fmt_field(g.temperature_c, '.0f', 3)} °C / slowdown "
            f"{fmt_field(g.slowdown_temperature_c, '.0f', 3)} °C\n",
            style=f"bold {styles.error}" if hot else "",
        )
        used = None if g.memory_used_bytes is None else g.memory_used_bytes / GIB
        total = None if g.memory_total_bytes is None else g.memory_total_bytes / GIB
        out.append(
            f"VRAM {fmt_field(used, '.1f', 5)}/{fmt_field(total, '.1f', 5)} GiB  "
            f"util {fmt_field(g.utilization_pct, '.0f', 3)}%\n"
        )
        out.append(
            f"power {fmt_field(g.power_w, '.0f', 4)}/{fmt_field(g.power_limit_w, '.0f', 4)} W  "
            f"SM {fmt_field(g.sm_clock_mhz, '.0f', 4)} MHz\n"
        )
        words = throttle_words(g)
        out.append(
            f"throttle: {words}",
            style=f"bold {styles.warning}" if words not in ("none", DASH) else "",
        )
    return out


def flags_section(
    view: SessionView, server: ServerView | None = None, *, styles: Styles = CONSOLE_STYLES
) -> Text:
    """The counts of specmon's own answers (every verdict over all answers, as the timeline and
    --json count them), the cycle over them, and what the server's window says when other
    clients' traffic is all there is (core.server_window)."""
    s = view.summary
    out = Text(
        f"answers       {s.total:>5}   failed     {s.failed:>5}\n"
        f"vanilla-speed {s.vanilla_speed:>5}   transition {s.transition:>5}\n"
        f"loop          {s.loop:>5}   garbled    {s.garbled:>5}\n"
        f"cancelled     {s.cancelled:>5}"  # Esc on an answer is not a failure
    )
    if server is not None and window_vanilla(server.window):
        al = server.window.acceptance_length or 1.0
        out.append(
            f"\nwindow AL {al:.2f} with drafts: VANILLA SPEED",
            style=f"bold {styles.error}",
        )
    cycle = cycle_text(view.cycle)
    if cycle and view.cycle is not None:
        for line in cycle_lines(view.cycle):
            out.append("\n" + line, style=styles.warning)
    elif others_traffic(server, s.total):
        out.append(
            "\ncounts specmon's own requests only: it sent\n"
            "none; the server's traffic is in speed,\nacceptance and load above",
            style="dim",
        )
    else:
        seen = view.cycle.requests if view.cycle else 0
        out.append(f"\ncycle: none seen ({seen} answer{'' if seen == 1 else 's'})", style="dim")
    return out


def cycle_lines(c: CycleView) -> list[str]:
    """A detected cycle on lines of its own: its period and degraded requests, then what it
    costs (the fast and degraded speeds, and the long-run speed as a share of the fast one),
    the seeds' headline finding; each line fits the panel's width."""
    lo, hi = c.period_min or c.period, c.period_max or c.period
    every = f"every {lo} requests" if lo == hi else f"every {lo}-{hi} requests"
    first = f"cycle: {every}"
    if c.degraded_per_cycle is not None:
        first += f", {c.degraded_per_cycle:.0f} degraded"
    lines = [first]
    fast, slow, long_run = c.fast_mean_tok_s, c.degraded_mean_tok_s, c.long_run_mean_tok_s
    lines.append(f"  fast {fmt_field(fast, '.0f')} · degraded {fmt_field(slow, '.0f')} tok/s")
    share = ""
    if long_run is not None and fast:
        share = f" = {long_run / fast * 100:.0f}% of fast"
    lines.append(f"  long-run {fmt_field(long_run, '.0f')} tok/s{share}")
    return lines


def panel_sections(
    view: SessionView | None,
    answer: AnswerNumbers | None,
    *,
    waiting: str = "connecting…",
    server_index: int = 0,
    now: float | None = None,
    styles: Styles = CONSOLE_STYLES,
) -> list[tuple[str, Text]]:
    """(title, text) of each section of the panel, for one view (`waiting`: what the server
    section says before there is one), about `view.servers[server_index]` (the first by
    default; the watch screen passes its selected row); the graphs end at `now` (default: the
    view's instant; the replay passes its play head)."""
    if view is None:
        waiting_text = [("server", _t(waiting, "dim"))]
        return waiting_text + [(name, _t(DASH, "dim")) for name in SidePanel.SECTIONS[1:]]
    server = view.servers[server_index] if 0 <= server_index < len(view.servers) else None
    if server is not None:
        server = live_numbers(server)
    n_spec = server.n_spec if server and server.n_spec is not None else view.info.n_spec
    return [
        ("server", server_section(view, server, styles=styles)),
        ("speed", speed_section(server, answer)),
        ("acceptance", acceptance_section(view, server, now, styles=styles)),
        ("positions", positions_section(server, n_spec, styles=styles)),
        ("load", load_section(view, server)),
        ("gpu", gpu_section(view, styles=styles)),
        ("flags", flags_section(view, server, styles=styles)),
    ]


PANEL_KEY = "F9"
"""The key that opens the whole panel where it is collapsed to its summary line."""


def panel_summary(
    view: SessionView | None,
    answer: AnswerNumbers | None,
    *,
    waiting: str = "connecting…",
    server_index: int = 0,
    styles: Styles = CONSOLE_STYLES,
) -> Text:
    """The panel in one line, for a terminal too small for the panel (the chat's and the
    replay's at 80x24): the server's state, window tok/s, AL and acceptance, the answers and
    failures, and the cycle when one is seen, most important first (a narrow line cuts the
    tail), e.g. "● up  tok/s 110.2  AL 3.41  acc 33%  answers 2 failed 0  cycle every 10 ·
    F9 panel"."""
    out = Text()
    server = None
    if view is not None and 0 <= server_index < len(view.servers):
        server = live_numbers(view.servers[server_index])
    if view is None:
        out.append(waiting, style="dim")
    else:
        status = server.status if server and server.status else "connecting"
        out.append(f"● {status}", style=styles.status(status))
        w = server.window if server else None
        tok_s = w.decode_tok_s if w else None
        if tok_s is None and answer is not None:
            tok_s = answer.decode_tok_s
        out.append(f"  tok/s {fmt_field(tok_s, '.1f')}")
        out.append(f"  AL {fmt_field(w.acceptance_length if w else None, '.2f')}")
        out.append(f"  acc {_pct_field(w.draft_acceptance_rate if w else None)}")
        s = view.summary
        own = "own answers" if others_traffic(server, s.total) else "answers"
        out.append(f"  {own} {s.total} failed {s.failed}")
        if s.cancelled:
            out.append(f" cancelled {s.cancelled}")
        c = view.cycle
        if c is not None and c.detected:
            lo, hi = c.period_min or c.period, c.period_max or c.period
            out.append(f"  cycle every {lo if lo == hi else f'{lo}-{hi}'}", style=styles.warning)
    out.append(f" · {PANEL_KEY} panel", style="dim")
    return out


def chosen_hint(worth: ServerPositionWorth) -> tuple[TrimHint, str] | None:
    """The hint to show and which numbers it came from: since start first (enough steps behind
    it), else the window."""
    if worth.lifetime is not None and worth.lifetime.hint is not None:
        return worth.lifetime.hint, "since start"
    if worth.window is not None and worth.window.hint is not None:
        return worth.window.hint, "window"
    return None


def hint_line(server: ServerView | None, *, styles: Styles = CONSOLE_STYLES) -> Text:
    """The trim hint on two short lines of the side panel, naming the numbers it came from
    (the bars above may show the window while the hint uses since-start numbers), e.g.
    "hint (since start): n_spec 8 keeps 97%" / "  pos 9-13 < 5% · press w" ("" when there is
    none; the modal, opened with w, has the whole sentence)."""
    if server is None:
        return Text()
    found = chosen_hint(server_position_worth(server))
    if found is None:
        return Text()
    hint, which = found
    first, last = hint.first_position, hint.last_position
    where = f"pos {first}" if first == last else f"pos {first}-{last}"
    kept = math.floor(hint.kept_share * 100 + 1e-9)
    return Text(
        f"\nhint ({which}): n_spec {hint.n_spec} keeps {kept}%"
        f"\n  {where} < {hint.threshold * 100:.0f}% · press w",
        style=styles.warning,
    )


class SidePanel(VerticalScroll):
    """The dashboard's sections, one Static each; `show()` at ~4 Hz."""

    SECTIONS = ("server", "speed", "acceptance", "positions", "load", "gpu", "flags")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="panel-note", markup=False)
        for name in self.SECTIONS:
            box = Static("", id=f"panel-{name}", classes="panel-section", markup=False)
            box.border_title = name
            yield box
        yield DiagnosisSection(id="panel-diagnosis", classes="panel-section")

    def show(
        self,
        view: SessionView | None,
        answer: AnswerNumbers | None = None,
        *,
        waiting: str = "connecting…",
        server_index: int = 0,
        now: float | None = None,
    ) -> None:
        """Redraw the sections whose text changed (about `view.servers[server_index]`; the
        graphs end at `now`, default the view's instant)."""
        sections = panel_sections(
            view,
            answer,
            waiting=waiting,
            server_index=server_index,
            now=now,
            styles=theme_styles(self.app.theme_variables),
        )
        for name, text in sections:
            key = text.plain + repr(text.spans)
            if self._shown.get(name) == key:
                continue
            self._shown[name] = key
            self.query_one(f"#panel-{name}", Static).update(text)
        self.query_one(DiagnosisSection).show(view)

    def note(self, text: str) -> None:
        """A one-line notice at the top of the panel (recording started, marker added)."""
        note = self.query_one("#panel-note", Static)
        note.update(Text(visible(text)))
        note.display = bool(text)


def toggle_open(panel: SidePanel, collapsed: str, back_to: Widget) -> None:
    """F9 on a screen with a side panel: where the screen has the `collapsed` class (the panel
    folded into its summary line), show the whole panel in place of the screen's main part
    (class -panel-open) and focus it, so the arrows and PgUp/PgDn scroll it; elsewhere only move
    the focus to the panel. Again (or Esc), back to `back_to`."""
    screen = panel.screen
    opening = not screen.has_class("-panel-open") and not panel.has_focus
    screen.set_class(opening and screen.has_class(collapsed), "-panel-open")
    if opening:
        panel.focus()
    else:
        back_to.focus()
