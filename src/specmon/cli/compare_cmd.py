"""`specmon compare A.json B.json [C.json ...]`: bench runs side by side.

Each metric of B, C, … is shown with its ratio to A and a verdict: "better" or "worse" when the
difference is larger than its noise (|Δ| > 2·sqrt(se_A² + se_B²), the noise taken from each run's
own per-request spread; a bootstrap for percentiles), "within noise" otherwise, nothing when the
noise is unknown (a single request). Files are the `--json` output of `specmon bench` (or the
per-run files of a sweep folder). See docs/bench.md.

Runs that measured different workloads (prompt or answer length, ignore_eos, concurrency, rate,
dataset, temperature) are not compared: their ratios would measure the workload, not the server.
The differences are named and the exit status is 2, unless --force shows the table anyway under
a warning.

Exit status: 0; 2 for bad arguments, a file that is not a bench result, or runs of different
workloads without --force.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from specmon.cli.args import PlanError, add_command, fail

NAME = "compare"
SUMMARY = "show bench runs side by side with ratios and noise verdicts"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument("files", nargs="+", metavar="RUN.json", help="bench results (--json output)")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    p.add_argument(
        "--force",
        action="store_true",
        help="compare runs of different workloads anyway (the table says they differ)",
    )


@dataclass(frozen=True, slots=True)
class ComparePlan:
    files: tuple[str, ...]
    force: bool = False
    markdown: str | None = None


def plan_from(args: argparse.Namespace) -> ComparePlan:
    if len(args.files) < 2:
        raise PlanError("give at least two result files (A.json B.json ...)")
    return ComparePlan(tuple(args.files), force=args.force, markdown=args.markdown)


def run(plan: ComparePlan) -> int:
    from specmon.bench.result import ResultError, load_result

    try:
        results = [load_result(f) for f in plan.files]
    except ResultError as exc:
        return fail(NAME, str(exc))
    from specmon.bench.compare import run_name, workload_differences

    names = [run_name(r, i, p) for i, (r, p) in enumerate(zip(results, plan.files, strict=True))]
    differences = workload_differences(results, names)
    if differences and not plan.force:
        for line in differences:
            print(f"specmon compare: {line}", file=sys.stderr)
        print(
            "specmon compare: ratios would compare the workloads, not the servers; "
            "--force shows them anyway",
            file=sys.stderr,
        )
        return 2
    table, markdown = render(results, list(plan.files))
    if differences:
        warning = "WARNING: different workloads, ratios compare them too: " + "; ".join(differences)
        table.caption = warning
        markdown = f"**{warning}**\n\n{markdown}"
    from rich.console import Console

    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(table)
    if plan.markdown:
        from pathlib import Path

        try:
            Path(plan.markdown).write_text(markdown, encoding="utf-8")
        except OSError as exc:
            return fail(NAME, f"cannot write {plan.markdown}: {exc.strerror}", 1)
    return 0


def render(results: list[Any], paths: list[str]) -> tuple[Any, str]:
    """(Rich table, Markdown text) of the comparison."""
    from rich.table import Table
    from rich.text import Text

    from specmon.bench.compare import compare, run_name, verdict
    from specmon.core.display_text import DASH

    names = [run_name(r, i, p) for i, (r, p) in enumerate(zip(results, paths, strict=True))]
    rows = compare(results)
    table = Table(title="specmon compare (ratios against A)", title_justify="left")
    table.add_column("metric", style="bold")
    for i, name in enumerate(names):
        table.add_column(Text(name), justify="right")
        if i > 0:
            table.add_column(f"{name.split()[0]}/A", justify="right")
    md = [
        "| metric | "
        + " | ".join(n if i == 0 else f"{n} | {n.split()[0]}/A" for i, n in enumerate(names))
        + " |"
    ]
    md.append("|---|" + "---:|" * (2 * len(names) - 1))
    for row in rows:
        digits = 2 if row.metric.unit == "ms" or row.metric.name == "acceptance length" else 1
        cells: list[Text | str] = [
            row.metric.name + (f" ({row.metric.unit})" if row.metric.unit else "")
        ]
        mdcells = [str(cells[0])]
        for i, cell in enumerate(row.cells):
            est = cell.estimate
            value = DASH if est is None else f"{est.value:,.{digits}f}"
            if est is not None and est.se is not None:
                value += f" ±{2 * est.se:,.{digits}f}"
            cells.append(value)
            mdcells.append(value)
            if i == 0:
                continue
            r = DASH if cell.ratio is None else f"x{cell.ratio:.3f}"
            word = verdict(cell)
            style = {"better": "green", "worse": "red", "differs": "yellow"}.get(word, "dim")
            t = Text(r)
            if word:
                t.append(f" {word}", style=style)
            cells.append(t)
            mdcells.append(f"{r} {word}".strip())
        table.add_row(*cells)
        md.append("| " + " | ".join(mdcells) + " |")
    notes = [
        f"{n}: {results[i].server.url}" + (" (SIMULATED)" if results[i].server.simulated else "")
        for i, n in enumerate(names)
    ]
    table.caption = Text("± = 2 standard errors; " + "; ".join(notes))
    md += ["", "± = 2 standard errors. " + "; ".join(notes)]
    return table, "\n".join(md) + "\n"
