"""A Rich live view of a session snapshot (for `specmon demo` and `specmon watch` until the
Textual app lands), and the plain-line form used when stdout is not a terminal.

It renders `SessionState.snapshot()` dicts only, read at a fixed rate; it never sees events one by
one. Untrusted text (model output, server details) is shown literally: Rich `Text` objects, never
markup, with control characters removed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specmon.core.events import Event, RequestStarted, StreamChunk

DASH = "—"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


_LINE_BREAKS = re.compile(r"[\t\n]+")


def clean(text: str, *, multiline: bool = False) -> str:
    """Text safe to print: control characters (escape sequences, bidi overrides) removed, and,
    unless `multiline`, tabs and newlines turned into spaces so one field stays one line (a
    server's error text cannot forge lines of its own in the output)."""
    text = _CONTROL.sub("", text)
    return text if multiline else _LINE_BREAKS.sub(" ", text)


def fmt(value: Any, spec: str = ".1f", unit: str = "") -> str:
    """A number formatted, or — when missing (never 0 for missing)."""
    if value is None or isinstance(value, bool):
        return DASH
    try:
        return f"{value:{spec}}{unit}"
    except (TypeError, ValueError):
        return DASH


class TextTail:
    """A hub subscriber keeping the last characters of the newest request's text (bounded)."""

    def __init__(self, max_chars: int = 600) -> None:
        self.max_chars = max_chars
        self.request_id: str | None = None
        self.text = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, RequestStarted):
            self.request_id = event.request_id
            self.text = ""
        elif isinstance(event, StreamChunk) and event.request_id == self.request_id:
            piece = event.text or event.reasoning
            if piece:
                self.text = (self.text + piece)[-self.max_chars :]

    def read(self) -> tuple[str | None, str]:
        return self.request_id, self.text


def _flag_text(row: dict[str, Any]) -> Text:
    verdict = row.get("vanilla")
    if row.get("outcome") != "ok":
        return Text(clean(f"{row.get('outcome')}: {row.get('error') or ''}")[:60], style="red")
    if not verdict:
        return Text(DASH)
    if verdict.get("flagged"):
        reasons = "; ".join(clean(str(r.get("text", r.get("code")))) for r in verdict["reasons"])
        return Text("VANILLA SPEED: " + reasons, style="bold yellow")
    return Text("ok" if verdict.get("judged") else DASH, style="green")


def requests_table(snapshot: dict[str, Any], max_rows: int = 12) -> Table:
    table = Table(title="requests (newest last)", expand=True, title_justify="left")
    for name, justify in (
        ("id", "left"),
        ("tokens", "right"),
        ("decode tok/s", "right"),
        ("TTFT s", "right"),
        ("AL client", "right"),
        ("AL server", "right"),
        ("flag", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    rows = snapshot.get("requests", {}).get("rows", [])[-max_rows:]
    for row in rows:
        al_server = row.get("metrics_acceptance_length")
        if al_server is None:
            al_server = row.get("server_acceptance_length")
        table.add_row(
            Text(clean(str(row.get("request_id")))),
            fmt(row.get("completion_tokens"), "d"),
            fmt(row.get("decode_tok_s")),
            fmt(row.get("ttft_s"), ".3f"),
            fmt(row.get("client_acceptance_length"), ".2f"),
            fmt(al_server, ".2f"),
            _flag_text(row),
        )
    return table


def servers_table(snapshot: dict[str, Any]) -> Table:
    table = Table(title="servers (/metrics, recent window)", expand=True, title_justify="left")
    for name in ("server", "status", "tok/s", "AL", "draft acc.", "per-position", "running"):
        table.add_column(name)
    for source, s in snapshot.get("servers", {}).items():
        status = str(s.get("status") or "connecting")
        style = {"up": "green", "stale": "yellow", "down": "red", "unreadable": "red"}.get(status)
        status_text = Text(status, style=style or "")
        if s.get("status_detail") and status != "up":
            status_text.append(" " + clean(str(s["status_detail"]))[:60])
        rates = s.get("per_position_rates")
        per_pos = " ".join(f"{r:.2f}" for r in rates[:8]) if rates else DASH
        rate = s.get("draft_acceptance_rate")
        table.add_row(
            Text(clean(source)),
            status_text,
            fmt(s.get("decode_tok_s")),
            fmt(s.get("acceptance_length"), ".2f"),
            fmt(rate * 100 if rate is not None else None, ".0f", "%"),
            per_pos,
            fmt(s.get("requests_running"), ".0f"),
        )
    return table


GIB = 1024**3


def gpu_line(g: dict[str, Any]) -> Text:
    """One GPU: temperature (and its slowdown threshold), power, VRAM, clocks, utilisation, and
    the clock-event reasons in force; — for every reading that is not available."""
    used, total = g.get("memory_used_bytes"), g.get("memory_total_bytes")
    vram = f"{fmt(used / GIB if used is not None else None)}/"
    vram += f"{fmt(total / GIB if total is not None else None)} GiB"
    slowdown = g.get("slowdown_temperature_c")
    temp = fmt(g.get("temperature_c"), ".0f", " °C")
    if slowdown is not None:
        temp += f" (slowdown {slowdown:.0f})"
    line = Text(
        clean(
            f"GPU {g.get('index')} {g.get('name') or ''}: {temp}  "
            f"{fmt(g.get('power_w'), '.0f')}/{fmt(g.get('power_limit_w'), '.0f')} W  VRAM {vram}  "
            f"SM {fmt(g.get('sm_clock_mhz'), '.0f')} MHz  "
            f"mem {fmt(g.get('memory_clock_mhz'), '.0f')} MHz  "
            f"util {fmt(g.get('utilization_pct'), '.0f', '%')}"
        )
    )
    reasons = [r for r in g.get("clock_event_reasons") or () if r != "gpu_idle"]
    if reasons:
        line.append(clean("  clocks held by: " + ", ".join(reasons)), style="yellow")
    return line


def render(
    snapshot: dict[str, Any], *, title: str, text_tail: tuple[str | None, str] | None = None
) -> RenderableType:
    """The whole view for one snapshot."""
    parts: list[RenderableType] = []
    if snapshot.get("simulated"):
        parts.append(
            Text(
                " SIMULATED — numbers from specmon's built-in simulator, not a real GPU ",
                style="bold white on magenta",
                justify="center",
            )
        )
    parts.append(servers_table(snapshot))
    parts.append(requests_table(snapshot))
    summary = snapshot.get("requests", {}).get("summary", {})
    cycle = snapshot.get("cycle") or {}
    line = Text(
        f"requests {summary.get('total', 0)}  ok {summary.get('ok', 0)}  "
        f"failed {summary.get('failed', 0)}  flagged {summary.get('flagged', 0)}  "
        f"mean decode {fmt(summary.get('mean_decode_tok_s'))} tok/s  "
        f"vanilla baseline {fmt((snapshot.get('session') or {}).get('baseline_tok_s'))} tok/s"
    )
    if cycle.get("detected"):
        line.append(
            f"   cycle: period {cycle.get('period')}, degraded {cycle.get('degraded_per_cycle')} "
            f"per cycle, long-run/peak {fmt(cycle.get('long_run_over_peak'), '.2f')}",
            style="yellow",
        )
    parts.append(line)
    gpu = snapshot.get("gpu") or {}
    for g in gpu.get("gpus", []):
        parts.append(gpu_line(g))
    if not gpu.get("gpus") and gpu.get("error"):
        parts.append(Text(clean(f"GPU {DASH} ({gpu['error']})"), style="dim"))
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
        border_style="magenta" if snapshot.get("simulated") else "blue",
    )


def plain_request_line(row: dict[str, Any], simulated: bool) -> str:
    """One line per finished request, for non-terminal output (no escape codes)."""
    verdict = row.get("vanilla") or {}
    if row.get("outcome") != "ok":
        flag = f"{row.get('outcome')}: {row.get('error') or ''}"
    elif verdict.get("flagged"):
        flag = "VANILLA SPEED: " + "; ".join(str(r.get("text")) for r in verdict.get("reasons", []))
    else:
        flag = "ok" if verdict.get("judged") else DASH
    al_server = row.get("metrics_acceptance_length")
    if al_server is None:
        al_server = row.get("server_acceptance_length")
    prefix = "[SIMULATED] " if simulated else ""
    return clean(
        f"{prefix}{row.get('request_id')}: {fmt(row.get('completion_tokens'), 'd')} tokens, "
        f"decode {fmt(row.get('decode_tok_s'))} tok/s, AL client "
        f"{fmt(row.get('client_acceptance_length'), '.2f')} server {fmt(al_server, '.2f')}, {flag}"
    )


def run_live(
    read_snapshot: Callable[[], dict[str, Any]],
    *,
    title: str,
    done: threading.Event,
    console: Console | None = None,
    read_text: Callable[[], tuple[str | None, str]] | None = None,
    fps: float = 4.0,
) -> None:
    """Redraw at `fps` until `done` is set (Ctrl-C propagates to the caller)."""
    console = console or Console()

    def view() -> RenderableType:
        tail = read_text() if read_text is not None else None
        return render(read_snapshot(), title=title, text_tail=tail)

    with Live(view(), console=console, refresh_per_second=fps, screen=False) as live:
        while not done.wait(1.0 / fps):
            live.update(view())
        live.update(view())


def run_plain(
    read_snapshot: Callable[[], dict[str, Any]],
    *,
    done: threading.Event,
    write: Callable[[str], None],
    interval: float = 0.5,
) -> None:
    """Print one plain line per finished request (and status changes) until `done` is set."""
    seen: set[str] = set()
    statuses: dict[str, str] = {}

    def emit_new() -> None:
        nonlocal seen
        snap = read_snapshot()
        simulated = bool(snap.get("simulated"))
        for source, s in snap.get("servers", {}).items():
            status = str(s.get("status"))
            if statuses.get(source) != status:
                statuses[source] = status
                detail = s.get("status_detail") or ""
                write(clean(f"server {source}: {status} {detail}".rstrip()))
        current: set[str] = set()
        for row in snap.get("requests", {}).get("rows", []):
            rid = str(row.get("request_id"))
            current.add(rid)
            if rid not in seen:
                write(plain_request_line(row, simulated))
        seen = current  # bounded like the state's rows

    while not done.wait(interval):
        emit_new()
    emit_new()
