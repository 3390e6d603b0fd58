"""Terminal output of bench: the live progress (Rich on a TTY, plain lines otherwise) and the
summary. Server text (model names, error messages) is shown literally: never parsed as markup."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from specmon.bench.result import BenchResult, fmt, fmt_pct, foreign_line, interrupted_line
from specmon.core.display_text import DASH
from specmon.core.events import RequestEnded
from specmon.runtime.terminal import is_terminal

PHASE_NAMES = {"prompts": "preparing prompts", "warmup": "warm-up", "measure": "measuring"}


class _Tally:
    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0
        self.last: float | None = None
        self.total_tok_s = 0.0
        self.counted = 0
        self.phase = ""

    def add(self, ended: RequestEnded, tok_s: float | None) -> None:
        if ended.outcome == "ok":
            self.ok += 1
            if tok_s is not None:
                self.last = tok_s
                self.total_tok_s += tok_s
                self.counted += 1
        elif ended.outcome == "failed":
            self.failed += 1

    @property
    def mean(self) -> float | None:
        return self.total_tok_s / self.counted if self.counted else None

    def numbers(self) -> str:
        """Fixed-width numbers (the line does not jump as values change)."""

        def num(v: float | None) -> str:
            return f"{v:9.1f}" if v is not None else f"{DASH:>9}"

        return (
            f"ok {self.ok:5d}  failed {self.failed:4d}  last {num(self.last)} tok/s  "
            f"mean {num(self.mean)} tok/s"
        )


class RichProgress:
    """A Rich progress bar per phase with fixed-width numbers (for a terminal)."""

    def __init__(self, console: Console | None = None, label: str = "") -> None:
        self._console = console or Console(stderr=True)
        self._label = label
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[numbers]}", markup=False),
            console=self._console,
            refresh_per_second=4,
            transient=False,
        )
        self._task: TaskID | None = None
        self._tally = _Tally()
        self._started = False

    def __enter__(self) -> RichProgress:
        self._progress.start()
        self._started = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def phase(self, name: str, total: int | None) -> None:
        if self._task is not None:  # the previous phase is over: stop its bar and its clock
            task = self._progress.tasks[-1]
            done = task.total if task.total is not None else max(task.completed, 1)
            self._progress.update(self._task, total=done, completed=done)
        self._tally = _Tally()
        description = f"{self._label}{PHASE_NAMES.get(name, name):<14}"
        self._task = self._progress.add_task(description, total=total, numbers="")

    def request_done(self, ended: RequestEnded, tokens_per_s: float | None) -> None:
        self._tally.add(ended, tokens_per_s)
        if self._task is not None:
            self._progress.update(self._task, advance=1, numbers=self._tally.numbers())

    def note(self, text: str) -> None:
        self._progress.console.print(Text(text, style="bold red"))


class PlainProgress:
    """One plain line per finished request (not a terminal: a log, a pipe, CI)."""

    def __init__(self, write: Callable[[str], None] | None = None, label: str = "") -> None:
        self._write = write or (lambda s: print(s, file=sys.stderr, flush=True))
        self._label = label
        self._phase = ""
        self._total: int | None = None
        self._n = 0
        self._tally = _Tally()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def phase(self, name: str, total: int | None) -> None:
        self._phase, self._total, self._n = name, total, 0
        self._tally = _Tally()
        what = PHASE_NAMES.get(name, name)
        self._write(f"{self._label}{what}" + (f" ({total})" if total is not None else " (timed)"))

    def request_done(self, ended: RequestEnded, tokens_per_s: float | None) -> None:
        if self._phase == "prompts":
            return
        self._n += 1
        self._tally.add(ended, tokens_per_s)
        width = len(str(self._total)) if self._total else 5
        of = f"/{self._total}" if self._total else ""
        status = "ok    " if ended.outcome == "ok" else f"{ended.outcome:<6}"
        tok = f"{tokens_per_s:9.1f} tok/s" if tokens_per_s is not None else f"{DASH:>9} tok/s"
        head = f"{self._label}{self._phase} {self._n:{width}d}{of}"
        line = f"{head} {status} {tok}  {self._tally.numbers()}"
        if ended.outcome != "ok" and ended.error:
            line += f"  error: {ended.error}"
        self._write(line)

    def note(self, text: str) -> None:
        self._write(f"{self._label}{text}")


def progress_for(stream: IO[str], label: str = "") -> RichProgress | PlainProgress:
    """Rich progress on a terminal, plain lines otherwise."""
    if is_terminal(stream):
        return RichProgress(Console(file=stream), label=label)
    return PlainProgress(lambda s: print(s, file=stream, flush=True), label=label)


def _kv_table() -> Table:
    """Label and value side by side: the value column is as wide as its widest value and the
    table never stretches to the terminal, so a value stays next to its label at any width."""
    t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 2), expand=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(justify="right", no_wrap=True)
    return t


POSITIONS_PER_ROW = 8
"""Per-position acceptance is shown in rows of this many positions (fits in 80 columns)."""


def per_position_table(rates: tuple[float, ...]) -> Table:
    """Acceptance by draft position, positions numbered from 1 (as the app numbers them; the
    JSON keeps the plain list, position 1 first), at most POSITIONS_PER_ROW per row."""
    t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 1), expand=False)
    t.add_column(style="bold", no_wrap=True)
    for _ in range(min(len(rates), POSITIONS_PER_ROW)):
        t.add_column(justify="right", no_wrap=True)
    for start in range(0, len(rates), POSITIONS_PER_ROW):
        chunk = rates[start : start + POSITIONS_PER_ROW]
        pad = [""] * (min(len(rates), POSITIONS_PER_ROW) - len(chunk))
        t.add_row("position", *(str(start + i + 1) for i in range(len(chunk))), *pad)
        t.add_row("accepted", *(fmt_pct(v) for v in chunk), *pad)
    return t


def summary_renderable(result: BenchResult) -> RenderableType:
    """The run's summary as Rich renderables (tables; server text literal)."""
    s, sd, srv, cfg = result.summary, result.spec_decode, result.server, result.config
    parts: list[RenderableType] = []
    head = Text("specmon bench — ", style="bold")
    head.append(srv.model or DASH)
    head.append(f"  @ {srv.url}")
    if srv.simulated:
        head.append("  SIMULATED", style="bold magenta")
        if srv.profile:
            head.append(f" (profile {srv.profile})")
    parts.append(head)
    parts.append(
        Text(
            f"vLLM {srv.vllm_version or DASH} · n_spec {DASH if srv.n_spec is None else srv.n_spec}"
            f" · GPU {srv.gpu or DASH}"
        )
    )
    rate = "inf" if cfg.request_rate == float("inf") else f"{cfg.request_rate:g}/s"
    size = (
        f"{cfg.input_len} in / {cfg.output_len} out"
        if cfg.dataset == "random"
        else (f"file {cfg.dataset}, {cfg.output_len} out by default")
    )
    what = f"{cfg.num_prompts} prompts" if cfg.duration_s is None else f"soak {cfg.duration_s:g} s"
    parts.append(
        Text(
            f"workload: {'random' if cfg.dataset == 'random' else 'dataset'} {size} · {what} · "
            f"{cfg.warmups} warm-ups · concurrency {cfg.concurrency} · rate {rate} · "
            f"temperature {cfg.temperature:g}" + (" · ignore_eos" if cfg.ignore_eos else "")
        )
    )
    if result.errors.interrupted:
        parts.append(
            Text(
                interrupted_line(result),
                style="bold yellow",
            )
        )

    t = _kv_table()
    t.add_row("completed / failed", f"{s.completed} / {s.failed}")
    t.add_row("duration", f"{fmt(s.duration_s, 2)} s")
    t.add_row("output tok/s", fmt(s.output_throughput))
    t.add_row("total tok/s", fmt(s.total_token_throughput))
    t.add_row(
        "request tok/s mean / max",
        f"{fmt(s.request_output_tok_s.mean)} / {fmt(s.request_output_tok_s.max)}",
    )
    t.add_row("decode tok/s mean", fmt(s.decode_tok_s.mean))
    parts += [Text(""), Text("Throughput", style="bold underline"), t]

    lat = Table(box=None, pad_edge=False, padding=(0, 2))
    lat.add_column("latency (ms)", style="bold")
    for col in ("mean", "median", "p95", "p99"):
        lat.add_column(col, justify="right")
    for name, d in (
        ("TTFT", s.ttft_ms),
        ("TPOT", s.tpot_ms),
        ("ITL", s.itl_ms),
        ("E2EL", s.e2el_ms),
    ):
        lat.add_row(name, fmt(d.mean, 2), fmt(d.median, 2), fmt(d.p95, 2), fmt(d.p99, 2))
    parts += [Text(""), lat]

    sp = _kv_table()
    al = fmt(sd.acceptance_length, 2)
    sp.add_row("acceptance length (/metrics)", al if sd.metrics_reliable else f"{al} UNRELIABLE")
    sp.add_row("draft acceptance rate", fmt_pct(sd.acceptance_rate))
    sp.add_row(
        "drafts / draft tokens / accepted",
        f"{fmt(sd.drafts, 0)} / {fmt(sd.draft_tokens, 0)} / {fmt(sd.accepted, 0)}",
    )
    sp.add_row("AL per request, server (mean)", fmt(sd.server_al_mean, 2))
    sp.add_row("AL per request, client chunks (mean)", fmt(sd.client_al_mean, 2))
    title = "Speculative decoding"
    if not sd.metrics_available:
        title += " (no /metrics deltas)"
    if result.server.spec_configured is False:
        title += ": not configured on this server"
    parts += [Text(""), Text(title, style="bold underline"), sp]
    if sd.per_position:
        parts += [
            Text("acceptance by draft position (/metrics)"),
            per_position_table(sd.per_position),
        ]
    foreign = foreign_line(sd)
    if foreign is not None:
        parts.append(Text(foreign, style="yellow" if sd.metrics_reliable else "bold red"))
    if sd.counter_resets:
        parts.append(
            Text(
                f"the server's counters reset {sd.counter_resets} time(s) during the run "
                "(a restart): /metrics deltas are reset-corrected",
                style="yellow",
            )
        )

    flagged = [r for r in result.requests if r.vanilla]
    if result.server.spec_configured is False:
        parts += [
            Text(""),
            Text(
                f"Vanilla-speed requests: all {s.completed} (speculation is not configured on "
                "this server)",
                style="bold underline",
            ),
        ]
        flagged = []
    else:
        parts += [
            Text(""),
            Text(
                f"Vanilla-speed requests: {len(flagged)} of {s.completed}", style="bold underline"
            ),
        ]
    for r in flagged[:12]:
        line = Text(f"  #{r.index + 1} {fmt(r.output_tok_s)} tok/s: ")
        line.append("; ".join(sentence for _, sentence in r.vanilla_reasons))
        parts.append(line)
    if len(flagged) > 12:
        parts.append(Text(f"  … and {len(flagged) - 12} more (see --json / --csv)"))
    if s.loop_requests or s.garbled_requests:
        parts.append(
            Text(
                f"Loop / garbled answers (the quality sentinel, judged before speed): "
                f"{s.loop_requests} / {s.garbled_requests} of {s.completed}"
            )
        )

    c = result.cycle
    if c is not None:
        parts += [
            Text(""),
            Text("Degradation cycle", style="bold underline"),
            Text(
                f"  every {c.period} requests: {c.fast_per_cycle:g} fast, "
                f"{c.transitions_per_cycle:g} transition, {c.degraded_per_cycle:g} degraded, "
                f"{c.recoveries_per_cycle:g} recovery"
                f" ({c.cycles} cycles seen)\n  fast-phase mean {c.fast_mean_tok_s:.1f} tok/s, "
                f"degraded {fmt(c.degraded_mean_tok_s)} tok/s, long-run mean "
                f"{c.long_run_mean_tok_s:.1f} tok/s ({c.share_degraded:.0%} of requests degraded)"
            ),
        ]
    else:
        parts.append(
            Text(
                f"Degradation cycle: none found in {s.completed} requests"
                + (" (at least 3 cycles must be seen)" if s.completed < 30 else "")
            )
        )

    if result.gpu:
        g = Table(box=None, pad_edge=False, padding=(0, 2))
        g.add_column("GPU", style="bold")
        for col in ("°C", "W", "SM MHz"):
            g.add_column(col + " min/mean/max", justify="right", no_wrap=True)
        for b in result.gpu:
            g.add_row(
                f"{b.index} {b.name or ''}".strip(),
                *(
                    f"{fmt(x.min, 0)}/{fmt(x.mean, 0)}/{fmt(x.max, 0)}"
                    for x in (b.temperature_c, b.power_w, b.sm_clock_mhz)
                ),
            )
        parts += [Text(""), g]
    else:
        parts += [Text(""), Text(f"GPU: {DASH} (not sampled)")]

    e = result.errors
    if e.by_message:
        parts += [Text(""), Text(f"Errors: {e.failed}", style="bold underline")]
        for message, n in list(e.by_message.items())[:10]:
            parts.append(Text(f"  {n:4d} x {message}"))
    if e.engine_dead:
        dead = Text("ENGINE DEAD", style="bold red")
        dead.append(
            f" after {e.engine_dead_after} completed requests: {e.engine_dead_reason or ''}"
        )
        parts += [Text(""), dead]
    return Group(*parts)


def print_summary(result: BenchResult, file: IO[str] | None = None) -> None:
    out = file or sys.stdout
    console = Console(file=out, highlight=False, width=None if is_terminal(out) else 140)
    console.print(summary_renderable(result))


def bar_chart(rows: list[tuple[str, float | None, str]], width: int = 40) -> list[str]:
    """Horizontal bars (label, value, note) scaled to the largest value; "—" for missing (and
    for a value that is not finite). The number is written in its field (`fmt`: out of range
    past it, never 300 digits)."""
    values = [v for _, v, _ in rows if v is not None and math.isfinite(v)]
    top = max(values) if values else 0.0
    label_w = max((len(label) for label, _, _ in rows), default=0)
    out: list[str] = []
    for label, v, note in rows:
        if v is None or not math.isfinite(v) or top <= 0:
            out.append(f"{label:<{label_w}}  {DASH}  {note}".rstrip())
            continue
        n = min(width, max(1, round(width * (v / top)))) if v > 0 else 0
        number = fmt(v).rjust(9)
        out.append(f"{label:<{label_w}}  {'█' * n}{' ' * (width - n)} {number}  {note}".rstrip())
    return out


def sweep_renderable(summary: Any) -> RenderableType:
    """The sweep table, a bar chart per concurrency and the recommendation (print_sweep adds
    the command)."""
    from specmon.bench.sweep import recommendation_lines

    parts: list[RenderableType] = []
    title = "specmon sweep" + (" — SIMULATED" if summary.simulated else "")
    if summary.interrupted:
        title += " — INTERRUPTED (partial; continue with --resume)"
    t = Table(title=title, title_justify="left")  # edges padded: the last column lines up
    names = [name for name, _ in summary.spec.grid]
    for name in names:
        t.add_column(name, justify="right")
    for col in (
        "n_spec",
        "conc",
        "runs",
        "mean tok/s",
        "max tok/s",
        "speedup",
        "mean E2EL ms",
        "p95 E2EL ms",
        "AL",
        "accept %",
        "vanilla",
    ):
        t.add_column(col, justify="right")

    def pm(e: Any, digits: int) -> str:
        if e is None:
            return DASH
        text = fmt(e.value, digits)
        return text + (f" ±{fmt(e.sd, digits)}" if e.sd is not None else "")

    for c in summary.cells:
        serve = dict(c.serve)
        t.add_row(
            *(serve.get(name, DASH) for name in names),
            str(c.n_spec), str(c.concurrency), str(c.repeats), pm(c.tok_s, 1), fmt(c.max_tok_s),
            DASH if c.speedup is None else f"x{fmt(c.speedup, 2)}", pm(c.e2el_mean_ms, 0),
            pm(c.e2el_p95_ms, 0), pm(c.acceptance_length, 2), pm(c.acceptance_rate, 1),
            str(c.vanilla_requests),
        )  # fmt: skip
    parts += [t, Text("± = standard deviation over the repeats", style="dim")]
    for rec in summary.recommendations:
        cells = [
            c for c in summary.cells if c.concurrency == rec.concurrency and c.serve == rec.serve
        ]
        best = rec.by_throughput.n_spec if rec.by_throughput else None
        where = "".join(f", {k}={v}" for k, v in rec.serve)
        rows = [
            (
                f"n={c.n_spec:<2}",
                None if c.tok_s is None else c.tok_s.value,
                "← recommended" if c.n_spec == best else "",
            )
            for c in cells
        ]
        parts.append(Text(""))
        parts.append(Text(f"mean output tok/s, concurrency {rec.concurrency}{where}", style="bold"))
        parts += [Text(line) for line in bar_chart(rows)]
    parts.append(Text(""))
    parts += [Text(line) for line in recommendation_lines(summary)]
    if summary.command():
        parts += [Text(""), Text("Recommended:", style="bold")]
    return Group(*parts)


def print_sweep(summary: Any, console: Console) -> None:
    """The sweep's report, then the recommended `vllm serve` command on lines of its own,
    never cropped or wrapped by the console (it is meant to be copied whole)."""
    console.print(sweep_renderable(summary))
    cmd = summary.command()
    if cmd:
        console.print(Text(cmd), soft_wrap=True)
