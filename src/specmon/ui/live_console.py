"""A Rich live view of a session (for `specmon demo` and `specmon watch` until the Textual app
lands), and the plain-line form used when stdout is not a terminal.

It renders typed `SessionView`s (core.views) read at a fixed rate; it never sees events one by
one and keeps no presentation rule of its own: formats, the flag's words and labels come from
ui.formatting, the choice of acceptance source from core. Untrusted text (model output, server
details) is shown literally: Rich `Text` objects, never markup, with control characters removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specmon.core.dispatch import event_table, ignore
from specmon.core.events import (
    CanaryProbed,
    Event,
    FleetSampled,
    GpuReading,
    GpuSampled,
    Marker,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    ServerLogLine,
    ServerStatusChanged,
    StreamChunk,
)
from specmon.core.histogram_quantiles import choose_latency
from specmon.core.verdict import request_verdict
from specmon.core.views import GpuView, PercentileView, RequestRow, SessionView
from specmon.ui.formatting import (
    DASH,
    SIMULATED_BANNER,
    SIMULATED_PREFIX,
    WINDOW_LABEL,
    clean,
    cycle_text,
    flag_words,
    fmt,
    fmt_acceptance,
    fmt_al,
    fmt_count,
    fmt_frac_pct,
    fmt_rates,
    fmt_tok_s,
    gpu_text,
    gpu_throttle_text,
    lifetime_label,
    shorten,
    status_word,
)
from specmon.ui.servers_text import layout_for, short_name, table_text
from specmon.ui.styles import CONSOLE_STYLES

__all__ = ["DASH", "TextTail", "clean", "fmt", "once_text", "render", "run_live", "run_plain"]


class TextTail:
    """A hub subscriber keeping the last characters of the newest request's text (bounded)."""

    def __init__(self, max_chars: int = 600) -> None:
        self.max_chars = max_chars
        self.request_id: str | None = None
        self.text = ""
        self._handlers: dict[type, Callable[[Any], None]] = event_table(
            {
                RequestStarted: self._started,
                StreamChunk: self._chunk,
                RequestEnded: ignore,
                MetricsScraped: ignore,
                ServerStatusChanged: ignore,
                ServerLogLine: ignore,
                GpuSampled: ignore,
                Marker: ignore,
                FleetSampled: ignore,
                CanaryProbed: ignore,
            },
            name="text tail",
        )

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _started(self, event: RequestStarted) -> None:
        self.request_id = event.request_id
        self.text = ""

    def _chunk(self, event: StreamChunk) -> None:
        if event.request_id != self.request_id:
            return
        piece = event.text or event.reasoning
        if piece:
            self.text = (self.text + piece)[-self.max_chars :]

    def read(self) -> tuple[str | None, str]:
        return self.request_id, self.text


def _flag_text(row: RequestRow) -> Text:
    words = flag_words(row)
    text = shorten(words.text, 60) if words.kind == "failed" else words.text
    return Text(text, style=CONSOLE_STYLES.flag(words.kind))


def requests_table(view: SessionView, max_rows: int = 12) -> Table:
    table = Table(title="requests (newest last)", expand=True, title_justify="left")
    for name, justify in (
        ("id", "left"),
        ("tokens", "right"),
        ("decode tok/s", "right"),
        ("TTFT ms", "right"),
        ("AL", "right"),
        ("AL client", "right"),
        ("AL server", "right"),
        ("flag", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in view.rows[-max_rows:]:
        server = row.acceptance_server
        table.add_row(
            Text(clean(row.request_id)),
            fmt(row.completion_tokens, "d"),
            fmt_tok_s(row.decode_tok_s),
            fmt(None if row.ttft_s is None else row.ttft_s * 1000, ".0f"),
            fmt_acceptance(row.acceptance),
            fmt_al(row.acceptance_chunks.acceptance_length if row.acceptance_chunks else None),
            fmt_al(server.acceptance_length if server else None),
            _flag_text(row),
        )
    return table


def servers_table(view: SessionView) -> Table:
    table = Table(
        title=f"servers (/metrics: {WINDOW_LABEL} = last {view.window_seconds:g} s; "
        "since start = counters' absolute values)",
        expand=True,
        title_justify="left",
    )
    for name in (
        "server",
        "status",
        "tok/s",
        "AL window",
        "draft acc. window",
        "per-position window",
        "AL since start",
        "draft acc. since start",
        "tokens since start",
        "running",
    ):
        table.add_column(name)
    for s in view.servers:
        status = status_word(s.status)
        status_text = Text(status, style=CONSOLE_STYLES.status(status))
        if s.status_detail and status != "up":
            status_text.append(" " + shorten(clean(s.status_detail), 60))
        life = s.lifetime
        life_al = fmt_al(life.acceptance_length) if life else DASH
        if life is not None and life.since_reset_t is not None:
            life_al += f" ({lifetime_label(life.since_reset_t)})"
        server_cell = Text(clean(s.source))
        if s.model:  # each server's own model (several servers may serve different ones)
            server_cell.append("\n" + clean(s.model), style="dim")
        table.add_row(
            server_cell,
            status_text,
            fmt_tok_s(s.window.decode_tok_s),
            fmt_al(s.window.acceptance_length),
            fmt_frac_pct(s.window.draft_acceptance_rate),
            fmt_rates(s.window.per_position_rates),
            life_al,
            fmt_frac_pct(life.draft_acceptance_rate) if life else DASH,
            fmt_count(life.generation_tokens) if life else DASH,
            fmt(s.requests_running, ".0f", width=7),
        )
    return table


def fleet_lines(view: SessionView) -> list[RenderableType]:
    """For servers read through a Prometheus: which one, its rate window, its targets' GPUs, and
    why there is no per-request acceptance (watch --prometheus)."""
    fleet = [s for s in view.servers if s.fleet is not None]
    if not fleet:
        return []
    proms = sorted({s.fleet.prometheus for s in fleet if s.fleet is not None})
    windows = sorted({s.fleet.rate_window_s for s in fleet if s.fleet is not None})
    lines: list[RenderableType] = [
        Text(
            clean(
                f"{len(fleet)} target(s) read through Prometheus {', '.join(proms)}; "
                f"{WINDOW_LABEL} = PromQL rate over {', '.join(f'{w:g}' for w in windows)} s"
            ),
            style="dim",
        )
    ]
    for s in fleet:
        for g in s.fleet.gpus if s.fleet is not None else ():
            lines.append(Text(clean(s.source) + "  ").append_text(gpu_line(g)))
    note = fleet[0].per_request_note
    if note:
        lines.append(Text(clean(note), style="dim"))
    return lines


def gpu_line(g: GpuReading) -> Text:
    """One GPU: temperature (and its slowdown threshold), power, VRAM, clocks, utilisation, and
    the clock-event reasons in force; — for every reading that is not available."""
    line = Text(gpu_text(g))
    throttle = gpu_throttle_text(g)
    if throttle:
        line.append("  " + throttle, style=CONSOLE_STYLES.warning)
    return line


def _gpu_parts(gpu: GpuView) -> list[RenderableType]:
    parts: list[RenderableType] = [gpu_line(g) for g in gpu.gpus]
    if not gpu.gpus and gpu.error:
        parts.append(Text(clean(f"GPU {DASH} ({gpu.error})"), style="dim"))
    return parts


def _ms(p: PercentileView) -> str:
    """p50/p95/p99 in ms."""
    return "/".join(fmt(None if v is None else v * 1000, ".0f") for v in (p.p50, p.p95, p.p99))


def latency_lines(view: SessionView) -> list[RenderableType]:
    """One line per server: TTFT and ITL p50/p95/p99 in ms and where they come from (this
    client's streams when it sent any, else the server's histograms over the window)."""
    out: list[RenderableType] = []
    for s in view.servers:
        choice = choose_latency(view, s)
        several = len(view.servers) > 1  # name the server only when there are several
        line = Text(f"latency {clean(s.source)}: " if several else "latency: ")
        line.append(f"TTFT p50/p95/p99 {_ms(choice.ttft_s)} ms · ITL {_ms(choice.itl_s)} ms")
        if choice.source == "histograms" and s.window.window_seconds is not None:
            line.append(f"  ({choice.words}, last {s.window.window_seconds:.0f} s)", style="dim")
        elif choice.source is not None:
            line.append(f"  ({choice.words})", style="dim")
        out.append(line)
    return out


def once_latency(view: SessionView, name_width: int) -> list[RenderableType]:
    """`watch --once`: a heading, then each server's TTFT and ITL p50/p95/p99 in ms on a line of
    its own, named as the servers table names it; — where no request fell in the window."""
    windows = [s.window.window_seconds for s in view.servers if s.window.window_seconds]
    over = f"last {max(windows):.0f} s" if windows else "the window"
    out: list[RenderableType] = [
        Text(f"latency p50/p95/p99 ms, {over} (— none in it)", style="dim")
    ]
    for s in view.servers:
        choice = choose_latency(view, s)
        line = Text(
            f"  {short_name(s.source, name_width):<{name_width}} ",
            no_wrap=True,
            overflow="ellipsis",
        )
        line.append(f"TTFT {_ms(choice.ttft_s):>14}  ITL {_ms(choice.itl_s):>14}")
        if choice.source is not None:  # this client's streams, or the server's histograms
            line.append(f"  ({choice.words})", style="dim")
        out.append(line)
    return out


def once_identities(view: SessionView, name_width: int) -> list[RenderableType]:
    """`watch --once`: what each server said it serves (model, vLLM version), named as the
    servers table names it, so servers of one host that serve other models are told apart."""
    if not any(s.model or s.vllm_version for s in view.servers):
        return []
    out: list[RenderableType] = [Text("serving", style="dim")]
    for s in view.servers:
        words = [clean(s.model) if s.model else DASH]
        if s.vllm_version:
            words.append(f"vLLM {clean(s.vllm_version)}")
        name = f"  {short_name(s.source, name_width):<{name_width}} "
        out.append(Text(name + " · ".join(words), no_wrap=True, overflow="ellipsis"))
    return out


def once_text(view: SessionView, *, title: str, width: int | None) -> RenderableType:
    """`specmon watch --once` for a person: the title, the app's servers table (one row per
    server in the view's order; columns left out by the app's own priority where `width` is
    short), each server's latency in ms, and the GPUs. No requests table: watch sends none."""
    parts: list[RenderableType] = [Text(title, style="bold")]
    if view.simulated:
        parts.append(Text(SIMULATED_BANNER, style=f"bold reverse {CONSOLE_STYLES.simulated}"))
    parts.append(table_text(view, -1, width=width))
    if view.servers:
        parts.extend(once_identities(view, layout_for(width).name_width))
        parts.extend(once_latency(view, layout_for(width).name_width))
    parts.extend(fleet_lines(view))
    parts.extend(_gpu_parts(view.gpu))
    return Group(*parts)


def render(
    view: SessionView, *, title: str, text_tail: tuple[str | None, str] | None = None
) -> RenderableType:
    """The whole screen for one view."""
    parts: list[RenderableType] = []
    if view.simulated:
        parts.append(
            Text(
                SIMULATED_BANNER,
                style=f"bold reverse {CONSOLE_STYLES.simulated}",
                justify="center",
            )
        )
    parts.append(servers_table(view))
    parts.extend(latency_lines(view))
    parts.extend(fleet_lines(view))
    parts.append(requests_table(view))
    summary = view.summary
    line = Text(
        f"requests {summary.total}  ok {summary.ok}  "
        f"failed {summary.failed}  flagged {summary.flagged}  "
        f"mean decode {fmt_tok_s(summary.mean_decode_tok_s)} tok/s  "
        f"vanilla baseline {fmt_tok_s(view.baseline_tok_s)} tok/s"
    )
    cycle = cycle_text(view.cycle)
    if cycle is not None:
        line.append(f"   cycle: {cycle}", style=CONSOLE_STYLES.warning)
    parts.append(line)
    parts.extend(_gpu_parts(view.gpu))
    if text_tail is not None and text_tail[0] is not None:
        rid, text = text_tail
        parts.append(
            Panel(
                Text(clean(text[-400:], multiline=True)),
                title=Text(f"answer {clean(rid or '')}"),
                height=8,
            )
        )
    return Panel(
        Group(*parts),
        title=Text(title),
        border_style=CONSOLE_STYLES.simulated if view.simulated else CONSOLE_STYLES.other,
    )


def plain_request_line(row: RequestRow, simulated: bool, *, again: bool = False) -> str:
    """One line per finished request, for non-terminal output (no escape codes); `again` for a
    request whose verdict changed after its line was written (it waited for the speed levels)."""
    server = row.acceptance_server
    chunks = row.acceptance_chunks
    prefix = SIMULATED_PREFIX if simulated else ""
    judged = " judged again" if again else ""
    return clean(
        f"{prefix}{row.request_id}{judged}: {fmt(row.completion_tokens, 'd')} tokens, "
        f"decode {fmt_tok_s(row.decode_tok_s)} tok/s, AL {fmt_acceptance(row.acceptance)} "
        f"(client {fmt_al(chunks.acceptance_length if chunks else None)} "
        f"server {fmt_al(server.acceptance_length if server else None)}), "
        f"{flag_words(row).text}"
    )


def run_live(
    read_view: Callable[[], SessionView],
    *,
    title: str,
    done: threading.Event,
    console: Console | None = None,
    read_text: Callable[[], tuple[str | None, str]] | None = None,
    fps: float = 4.0,
    final_view: Callable[[], SessionView] | None = None,
) -> None:
    """Redraw at `fps` until `done` is set (Ctrl-C propagates to the caller). `read_view` gives
    the latest published view; `final_view` (default `read_view`) the up-to-date one drawn last."""
    console = console or Console()

    def view(read: Callable[[], SessionView] = read_view) -> RenderableType:
        tail = read_text() if read_text is not None else None
        return render(read(), title=title, text_tail=tail)

    with Live(view(), console=console, refresh_per_second=fps, screen=False) as live:
        while not done.wait(1.0 / fps):
            live.update(view())
        live.update(view(final_view or read_view))


def run_plain(
    read_view: Callable[[], SessionView],
    *,
    done: threading.Event,
    write: Callable[[str], None],
    interval: float = 0.5,
    final_view: Callable[[], SessionView] | None = None,
) -> None:
    """Print one plain line per finished request (and status changes) until `done` is set.
    `read_view` gives the latest published view; `final_view` (default `read_view`) the
    up-to-date one read last, so no finished request is missed."""
    seen: dict[str, str] = {}
    """The rows written, with the verdict they were written with."""
    statuses: dict[str, str] = {}

    def emit_new(read: Callable[[], SessionView] = read_view) -> None:
        nonlocal seen
        view = read()
        for s in view.servers:
            status = str(s.status)
            if statuses.get(s.source) != status:
                statuses[s.source] = status
                write(clean(f"server {s.source}: {status} {s.status_detail}".rstrip()))
        current: dict[str, str] = {}
        for row in view.rows:
            kind = request_verdict(row).kind
            current[row.request_id] = kind
            before = seen.get(row.request_id)
            if before is None:
                write(plain_request_line(row, view.simulated))
            elif before != kind:  # classed once the speed levels appeared: say it again
                write(plain_request_line(row, view.simulated, again=True))
        seen = current  # bounded like the state's rows

    while not done.wait(interval):
        emit_new()
    emit_new(final_view or read_view)
