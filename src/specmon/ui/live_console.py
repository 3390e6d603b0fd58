"""A session without the Textual app: `specmon watch --once` (Rich text, printed once) and the
plain lines of watch, demo, serve and replay when the app does not open (stdin or stdout is not
a terminal: docs/app.md, "Without a terminal").

It renders typed `SessionView`s (core.views); it never sees events one by one and keeps no
presentation rule of its own: formats, the flag's words and labels come from ui.formatting, the
servers table's text from ui.servers_text, the choice of acceptance source from core. Untrusted
text (model output, server details) is shown literally: Rich `Text` objects, never markup, with
control characters removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.text import Text

from specmon.core.events import GpuReading
from specmon.core.histogram_quantiles import choose_latency
from specmon.core.verdict import request_verdict
from specmon.core.views import GpuView, PercentileView, RequestRow, SessionView
from specmon.ui.formatting import (
    DASH,
    SIMULATED_BANNER,
    SIMULATED_PREFIX,
    WINDOW_LABEL,
    clean,
    flag_words,
    fmt,
    fmt_acceptance,
    fmt_al,
    fmt_tok_s,
    gpu_text,
    gpu_throttle_text,
)
from specmon.ui.servers_text import layout_for, short_name, table_text
from specmon.ui.styles import CONSOLE_STYLES

__all__ = ["DASH", "clean", "fmt", "once_text", "run_plain"]


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
