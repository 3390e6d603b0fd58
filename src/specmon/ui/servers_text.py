"""The servers table's text: one row per watched server, one sub-row per engine. The app's
dashboard (ui.widgets.servers_table) and `specmon watch --once` both print it, so both keep the
same columns and leave them out in the same order where the width is short (DROP_ORDER).

A row shows the server's state (up, stale, down or unreadable, "restarted" for a while after its
counters reset; the last error under a server that is not up), its window decode tok/s, AL and
draft acceptance rate, requests running and waiting, KV-cache usage, and the temperature and
power of the GPUs attributed to it. A server with several engines (data-parallel ranks) gets one
sub-row per engine under its own row, which holds the engines summed (tok/s, running, waiting)
or pooled (AL, acceptance: the engines' counter deltas added before dividing).

Everything is read from `ServerView` (core.views) and the session's GPU readings, so any source
of server views (a live scrape, a replay, a Prometheus fleet) fills it the same way. Numbers sit in
fixed-width fields and a missing one is "—"; nothing jumps. The text is built by pure functions
(`table_text`), tested without an app, and import no Textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from rich.text import Text

from specmon.core.events import GpuReading
from specmon.core.views import EngineView, ServerView, SessionView
from specmon.ui.formatting import fmt_field, shorten, visible
from specmon.ui.styles import CONSOLE_STYLES, Styles

RESTART_SHOWN_S = 30.0
"""For this long after a counter reset the state says "restarted"."""
NAME_WIDTH = 26
"""Characters of the server column (longer addresses are cut with …)."""
ERROR_WIDTH = 100
"""Characters of a down server's last error."""
EMPTY_TEXT = "no server: press a to add one"

COLUMNS: tuple[tuple[str, int], ...] = (
    ("tok/s", 7),
    ("AL", 5),
    ("acc%", 4),
    ("run", 4),
    ("wait", 4),
    ("KV%", 4),
    ("°C", 4),
    ("W", 5),
)
"""The number columns after the server's name and state: (title, width)."""

DROP_ORDER = ("wait", "run", "KV%", "acc%", "W", "°C")
"""Where the table is too narrow (an 80-column terminal), the columns left out first to last;
tok/s and AL always stay (the server's name is cut to MIN_NAME_WIDTH first)."""
MIN_NAME_WIDTH = 16
"""The server column is narrowed to this before any number column is left out."""

NOT_READING = ("down", "unreadable")
"""States in which a server's live numbers are not being read: they are shown — (its last error
says why), not the last values it had. Since-start numbers (the counters' absolute values at the
last scrape) stay."""


def live_numbers(server: ServerView) -> ServerView:
    """The server as shown: its window numbers and gauges blanked while it is not being read."""
    if server.status not in NOT_READING:
        return server
    w = server.window
    return replace(
        server,
        window=replace(
            w,
            decode_tok_s=None,
            acceptance_length=None,
            draft_acceptance_rate=None,
            per_position_rates=None,
        ),
        requests_running=None,
        requests_waiting=None,
        kv_cache_usage_frac=None,
        engine_numbers=(),
    )


def _pct(frac: float | None) -> float | None:
    return None if frac is None else frac * 100


def short_name(source: str, width: int = NAME_WIDTH) -> str:
    """A server's address without the scheme, cut to `width` characters (…); control
    characters made visible (the address came from the user or a file). A long address is cut
    within its host, so that its port (and path) stays: two servers on one host stay apart."""
    text = visible(source.split("://", 1)[-1])
    return shorten(text, width, keep_end=text[_host_end(text) :])


def _host_end(address: str) -> int:
    """Where the host of `address` (no scheme: host[:port][/path]) ends."""
    if address.startswith("["):  # an IPv6 literal: [::1]:8000
        close = address.find("]")
        return close + 1 if close > 0 else len(address)
    ends = [i for i in (address.find(":"), address.find("/")) if i >= 0]
    return min(ends) if ends else len(address)


def state_word(server: ServerView, now: float | None) -> str:
    """What the state column says: the status, "restarted" within RESTART_SHOWN_S of a counter
    reset on a server that is up, "connecting" before anything was heard."""
    status = server.status or "connecting"
    resets = server.recent_resets
    if status == "up" and resets and now is not None and now - resets[-1].t <= RESTART_SHOWN_S:
        return "restarted"
    return status


def server_gpus(view: SessionView, server: ServerView) -> tuple[GpuReading, ...]:
    """The GPUs attributed to a server: those whose reading names the server's host (a
    dcgm-exporter's `hostname` label), else every GPU when the session watches one server
    only. Several servers and readings without a host: none (the table says —, not a guess)."""
    gpus = view.gpu.gpus
    if not gpus:
        return ()
    host = urlsplit(server.source).hostname
    named = tuple(g for g in gpus if g.host is not None and host is not None and g.host == host)
    if named:
        return named
    if len(view.servers) == 1 and all(g.host is None for g in gpus):
        return gpus
    return ()


def gpu_numbers(gpus: Sequence[GpuReading]) -> tuple[float | None, float | None]:
    """(hottest temperature, summed power) of the given GPUs; None when none reads it."""
    temps = [g.temperature_c for g in gpus if g.temperature_c is not None]
    powers = [g.power_w for g in gpus if g.power_w is not None]
    return (max(temps) if temps else None, sum(powers) if powers else None)


@dataclass(frozen=True, slots=True)
class TableLayout:
    """What fits in a width: the server column's width and the number columns kept."""

    name_width: int = NAME_WIDTH
    kept: tuple[str, ...] = tuple(title for title, _ in COLUMNS)


def row_width(name_width: int, kept: Sequence[str]) -> int:
    """Characters of one row: marker, name, state and the kept number cells."""
    return 2 + name_width + 1 + 10 + sum(1 + width for title, width in COLUMNS if title in kept)


def layout_for(width: int | None) -> TableLayout:
    """The widest layout whose rows fit `width` characters (None: everything): the server
    column narrows to MIN_NAME_WIDTH first, then number columns go in DROP_ORDER."""
    if width is None:
        return TableLayout()
    kept = [title for title, _ in COLUMNS]
    spare = width - row_width(NAME_WIDTH, kept)
    if spare >= 0:
        return TableLayout()
    name_width = max(MIN_NAME_WIDTH, NAME_WIDTH + spare)
    for title in DROP_ORDER:
        if row_width(name_width, kept) <= width:
            break
        kept.remove(title)
    return TableLayout(name_width, tuple(kept))


def header_line(layout: TableLayout | None = None) -> str:
    layout = layout or TableLayout()
    cells = "".join(" " + title.rjust(w) for title, w in COLUMNS if title in layout.kept)
    return f"  {'server':<{layout.name_width}} {'state':<10}{cells}"


def _keep(cells: str, layout: TableLayout) -> str:
    """The kept cells of a row of all of them (each " " + cell, COLUMNS' widths)."""
    out, at = [], 0
    for title, width in COLUMNS:
        if title in layout.kept:
            out.append(cells[at : at + 1 + width])
        at += 1 + width
    return "".join(out)


def _cells(
    tok_s: float | None,
    al: float | None,
    rate: float | None,
    running: float | None,
    waiting: float | None,
    kv_frac: float | None,
    gpu: tuple[float | None, float | None] | None,
) -> str:
    """The fixed-width number cells of a row; `gpu` None leaves the GPU columns blank."""
    cells = [
        fmt_field(tok_s, ".1f", 7),
        fmt_field(al, ".2f", 5),
        fmt_field(_pct(rate), ".0f", 4),
        fmt_field(running, ".0f", 4),
        fmt_field(waiting, ".0f", 4),
        fmt_field(_pct(kv_frac), ".0f", 4),
    ]
    cells += (
        [" " * 4, " " * 5]
        if gpu is None
        else [fmt_field(gpu[0], ".0f", 4), fmt_field(gpu[1], ".0f", 5)]
    )
    return "".join(" " + cell for cell in cells)


def server_cells(view: SessionView, server: ServerView) -> str:
    """The number cells of a server row (fixed width); — for the server's own numbers while it
    is down or unreadable."""
    server = live_numbers(server)
    w = server.window
    return _cells(
        w.decode_tok_s,
        w.acceptance_length,
        w.draft_acceptance_rate,
        server.requests_running,
        server.requests_waiting,
        server.kv_cache_usage_frac,
        gpu_numbers(server_gpus(view, server)),
    )


def engine_cells(engine: EngineView) -> str:
    """The number cells of an engine sub-row (no GPU columns: blank)."""
    return _cells(
        engine.decode_tok_s,
        engine.acceptance_length,
        engine.draft_acceptance_rate,
        engine.requests_running,
        engine.requests_waiting,
        engine.kv_cache_usage_frac,
        None,
    )


def table_text(
    view: SessionView | None,
    selected: int,
    *,
    waiting: str = "connecting…",
    width: int | None = None,
    styles: Styles = CONSOLE_STYLES,
) -> Text:
    """The whole table for one view: a header line, then per server its row (▶ on the selected
    one), its last error when it is not up, and its engines when it has more than one (and is
    being read). `width`: the characters a row may take (layout_for: a narrower server column,
    then fewer number columns, so that no row wraps); None: every column."""
    if view is None:
        return Text(waiting, style="dim")
    if not view.servers:
        return Text(EMPTY_TEXT, style=f"bold {styles.warning}")
    layout = layout_for(width)
    name_width = layout.name_width
    out = Text(header_line(layout), style="dim")
    for n, server in enumerate(view.servers):
        chosen = n == selected
        state = state_word(server, view.t)
        out.append("\n")
        out.append("▶ " if chosen else "  ", style="bold")
        name = short_name(server.source, name_width)
        out.append(f"{name:<{name_width}} ", style="bold" if chosen else "")
        out.append(f"{state:<10}", style=styles.status(state))
        out.append(_keep(server_cells(view, server), layout), style="bold" if chosen else "")
        if server.status in ("down", "stale", "unreadable") and server.status_detail:
            detail = visible(" ".join(server.status_detail.split()))
            limit = ERROR_WIDTH if width is None else max(20, width - len("    last error: "))
            detail = shorten(detail, limit)
            out.append(f"\n    last error: {detail}", style=styles.error)
        if len(server.engine_numbers) > 1 and server.status not in NOT_READING:
            for engine in server.engine_numbers:
                label = short_name(f"engine {engine.engine}", name_width - 4)
                out.append(f"\n    └ {label:<{name_width - 4}} {'':<10}", style="dim")
                out.append(_keep(engine_cells(engine), layout), style="dim")
    return out
