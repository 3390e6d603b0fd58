"""A sweep of num_speculative_tokens: one bench run per (point, concurrency, repeat), saved as
it finishes, so an interrupted sweep loses at most the run in progress and `--resume` goes on.

The sweep folder:
- `sweep.json` — the settings (points and their URLs or the host-mode flags, the serve grid,
  concurrencies, repeats, bench settings);
- `runs/n{N}-c{C}-r{R}.json` — each finished run (a `specmon bench --json` result; compare reads
  it); with a serve grid `runs/n{N}_{name}-{value}-c{C}-r{R}.json`; an interrupted run is kept
  as `….partial.json` and measured again on resume;
- `failed.json` — points whose server failed, with the cause (keyed by the point's label);
- `summary.json`, `summary.csv`, `summary.md` — the table and the recommendation, rewritten
  after every run.

Servers come from a `ServerProvider` (servers.py): attached URLs, or host mode (a server
started per point). A serve grid (max_num_batched_tokens=4096,8192, ...) is crossed with the
n_spec values: every combination is a point, and the recommendation is made per combination.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from specmon.bench.analysis import analyze
from specmon.bench.config import BenchConfig, ServeGrid, grid_combinations
from specmon.bench.recommend import (
    CellStats,
    Recommendation,
    ServeIdentity,
    batch_size_schedule,
    cell_stats,
    recommend,
    serve_command,
    with_speedups,
)
from specmon.bench.result import BenchResult, ResultError, load_result, result_scrubber
from specmon.bench.runner import BenchError, RunOutput
from specmon.bench.servers import Endpoint, Point, ServerProvider, ServerUnavailable
from specmon.core.display_text import DASH, MAX_NUMBER_CHARS, fit

FORMAT = "specmon-sweep"
VERSION = 1


class SweepError(RuntimeError):
    """A sweep folder that cannot be used (str() says why)."""


@dataclass(frozen=True, slots=True)
class SweepSpec:
    points: tuple[int, ...]
    concurrencies: tuple[int, ...]
    repeats: int
    config: BenchConfig
    urls: dict[int, str] = field(default_factory=dict)
    grid: ServeGrid = ()
    """Serve-parameter grid crossed with the n_spec values (host mode only)."""
    host: dict[str, Any] | None = None
    """Host mode: {"argv": the host-mode flags as given (secrets never: API keys are not host
    flags), "model", "draft", "method"}; None for attached servers."""
    described: dict[str, Any] | None = None
    """Attached servers as the user described them (`--method`, `--draft`): {"method", "draft"},
    for the recommended `vllm serve` line; None when not given (or in host mode)."""

    def point_list(self) -> list[Point]:
        """Every point, grid combination by combination, n_spec in the given order."""
        return [Point(n, combo) for combo in grid_combinations(self.grid) for n in self.points]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "points": list(self.points),
            "concurrencies": list(self.concurrencies),
            "repeats": self.repeats,
            "config": self.config.as_dict(),
            "urls": {str(k): v for k, v in self.urls.items()},
            "grid": [[name, list(values)] for name, values in self.grid],
            "host": self.host,
            "described": self.described,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> SweepSpec:
        if d.get("format") != FORMAT:
            raise SweepError("not a specmon sweep folder (sweep.json has another format)")
        return SweepSpec(
            points=tuple(int(x) for x in d["points"]),
            concurrencies=tuple(int(x) for x in d["concurrencies"]),
            repeats=int(d["repeats"]),
            config=BenchConfig.from_dict(d["config"]),
            urls={int(k): str(v) for k, v in (d.get("urls") or {}).items()},
            grid=tuple((str(n), tuple(str(v) for v in vs)) for n, vs in d.get("grid") or ()),
            host=d.get("host") if isinstance(d.get("host"), dict) else None,
            described=d.get("described") if isinstance(d.get("described"), dict) else None,
        )


def run_key(
    n_spec: int, concurrency: int, repeat: int, serve: tuple[tuple[str, str], ...] = ()
) -> str:
    return f"{Point(n_spec, serve).key}-c{concurrency}-r{repeat}"


def _scrubbed(value: dict[str, Any], spec: SweepSpec) -> Any:
    """A sweep file's content as it may be written: no URL password (the servers' URLs keep
    no `user:password@`: `--resume` takes them again from `--attach`), no environment token
    value, no secret by shape (core.redaction.Scrubber)."""
    return result_scrubber(*spec.urls.values()).value(value)


class SweepStore:
    """The sweep folder (see the module docstring)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.runs = self.folder / "runs"

    def create(self, spec: SweepSpec) -> None:
        if (self.folder / "sweep.json").exists():
            raise SweepError(f"{self.folder} already holds a sweep: continue it with --resume")
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"cannot create {self.folder}: {exc.strerror or exc}") from None
        self._write("sweep.json", json.dumps(_scrubbed(spec.as_dict(), spec), indent=1))

    def load_spec(self) -> SweepSpec:
        path = self.folder / "sweep.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError:
            raise SweepError(f"{self.folder} holds no sweep (no sweep.json)") from None
        except json.JSONDecodeError as exc:
            raise SweepError(f"{path} is damaged ({exc})") from None
        try:
            return SweepSpec.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise SweepError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None

    def _write(self, name: str, text: str) -> None:
        path = self.folder / name
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # atomic: a Ctrl-C never leaves half a file

    def save_run(self, key: str, result: BenchResult, *, partial: bool = False) -> Path:
        name = f"runs/{key}{'.partial' if partial else ''}.json"
        self._write(name, result.to_json() + "\n")
        if not partial:  # measured again in full: the interrupted attempt is superseded
            (self.runs / f"{key}.partial.json").unlink(missing_ok=True)
        return self.folder / name

    def load_runs(self) -> dict[str, BenchResult]:
        out: dict[str, BenchResult] = {}
        if not self.runs.is_dir():
            return out
        for path in sorted(self.runs.glob("n*-c*-r*.json")):
            if path.name.endswith(".partial.json"):
                continue
            try:
                out[path.name.removesuffix(".json")] = load_result(path)
            except ResultError:
                continue  # a damaged run is measured again
        return out

    def load_failures(self) -> dict[str, str]:
        path = self.folder / "failed.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        # Folders of the first version keyed failures by n_spec alone.
        return {(f"n_spec={k}" if str(k).isdigit() else str(k)): str(v) for k, v in data.items()}

    def save_failures(self, failures: dict[str, str]) -> None:
        self._write("failed.json", json.dumps(result_scrubber().value(failures), indent=1))

    def save_summary(self, summary: SweepSummary) -> None:
        data = _scrubbed(summary.as_dict(), summary.spec)
        self._write("summary.json", json.dumps(data, indent=1))
        self._write("summary.csv", summary_csv(summary))
        self._write("summary.md", summary_markdown(summary))


@dataclass(frozen=True, slots=True)
class SweepSummary:
    spec: SweepSpec
    cells: tuple[CellStats, ...]
    recommendations: tuple[Recommendation, ...]
    failures: dict[str, str]
    """Point label (`n_spec=8`, `n_spec=8 max_num_batched_tokens=4096`) → cause."""
    missing: tuple[str, ...]
    """Runs not measured (failed points, interrupted, not reached)."""
    identity: ServeIdentity
    interrupted: bool = False
    simulated: bool = False

    @property
    def best_serve(self) -> tuple[tuple[str, str], ...]:
        """The serve-grid combination whose throughput choice at the lowest concurrency is the
        fastest (() without a grid)."""
        recs = [r for r in self.recommendations if r.by_throughput is not None]
        if not recs:
            return ()
        low = min(r.concurrency for r in recs)
        best = max(
            (r for r in recs if r.concurrency == low),
            key=lambda r: r.by_throughput.value if r.by_throughput else 0.0,
        )
        return best.serve

    @property
    def schedule(self) -> list[list[int]] | None:
        serve = self.best_serve
        return batch_size_schedule([r for r in self.recommendations if r.serve == serve])

    def command(self) -> str | None:
        serve = self.best_serve
        recs = [r for r in self.recommendations if r.by_throughput is not None and r.serve == serve]
        if not recs:
            return None
        choice = recs[0].by_throughput
        assert choice is not None
        return serve_command(
            self.identity, choice.n_spec, self.schedule, Point(choice.n_spec, serve).serve_args()
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": "specmon-sweep-summary",
            "version": 1,
            "spec": self.spec.as_dict(),
            "cells": [asdict(c) for c in self.cells],
            "recommendations": [
                {
                    "serve": dict(r.serve),
                    "concurrency": r.concurrency,
                    "by_throughput": asdict(r.by_throughput) if r.by_throughput else None,
                    "by_p95": asdict(r.by_p95) if r.by_p95 else None,
                    "differ": r.differ,
                }
                for r in self.recommendations
            ],
            "num_speculative_tokens_per_batch_size": self.schedule,
            "command": self.command(),
            "failures": dict(self.failures),
            "missing": list(self.missing),
            "interrupted": self.interrupted,
            "simulated": self.simulated,
        }


def summarize(
    spec: SweepSpec,
    runs: dict[str, BenchResult],
    failures: dict[str, str],
    *,
    interrupted: bool = False,
) -> SweepSummary:
    cells: list[CellStats] = []
    missing: list[str] = []
    host = spec.host or spec.described or {}
    model = host.get("model")
    simulated = False
    for point in spec.point_list():
        n = point.n_spec
        for c in spec.concurrencies:
            got = []
            for r in range(1, spec.repeats + 1):
                key = run_key(n, c, r, point.serve)
                res = runs.get(key)
                if res is None or res.errors.engine_dead or res.summary.completed == 0:
                    missing.append(key)
                    continue
                got.append(res)
                model = model or res.server.model
                simulated = simulated or res.server.simulated
            if got:
                cells.append(cell_stats(n, c, got, point.serve))
    cells = with_speedups(cells)
    return SweepSummary(
        spec=spec,
        cells=tuple(cells),
        recommendations=tuple(recommend(cells)),
        failures=dict(failures),
        missing=tuple(missing),
        identity=ServeIdentity(
            model=model,
            draft_model=host.get("draft"),
            method=host.get("method"),
            extra=dict(host.get("spec_extra") or {}),
            serve_args=tuple(host.get("serve_args") or ()),
        ),
        interrupted=interrupted,
        simulated=simulated,
    )


def _cell_of(e: Any) -> Any:
    return None if e is None else e.value


def summary_csv(summary: SweepSummary) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    names = [name for name, _ in summary.spec.grid]
    w.writerow(
        [
            *names,
            "n_spec", "concurrency", "repeats", "tok_s_mean", "tok_s_sd", "tok_s_max", "speedup",
            "e2el_mean_ms", "e2el_mean_sd", "e2el_p95_ms", "e2el_p95_sd", "acceptance_length",
            "acceptance_length_sd", "acceptance_rate_pct", "vanilla_requests", "failed_requests",
        ]
    )  # fmt: skip
    for c in summary.cells:

        def sd(e: Any) -> Any:
            return "" if e is None or e.sd is None else e.sd

        serve = dict(c.serve)
        w.writerow(
            [serve.get(name, "") for name in names]
            + [
                c.n_spec, c.concurrency, c.repeats, _cell_of(c.tok_s), sd(c.tok_s), c.max_tok_s,
                c.speedup, _cell_of(c.e2el_mean_ms), sd(c.e2el_mean_ms), _cell_of(c.e2el_p95_ms),
                sd(c.e2el_p95_ms), _cell_of(c.acceptance_length), sd(c.acceptance_length),
                _cell_of(c.acceptance_rate), c.vanilla_requests, c.failed_requests,
            ]
        )  # fmt: skip
    return out.getvalue()


def _pm(e: Any, digits: int) -> str:
    if e is None:
        return DASH
    text = fit(e.value, f",.{digits}f", MAX_NUMBER_CHARS)
    if e.sd is not None:
        text += f" ±{fit(e.sd, f',.{digits}f', MAX_NUMBER_CHARS)}"
    return text


def recommendation_lines(summary: SweepSummary) -> list[str]:
    """The recommendation in sentences (also the tail of the terminal output)."""
    lines: list[str] = []
    concs = {r.concurrency for r in summary.recommendations}
    for r in summary.recommendations:
        where = f" at concurrency {r.concurrency}" if len(concs) > 1 else ""
        if r.serve:
            where += " with " + " ".join(f"{k}={v}" for k, v in r.serve)
        t, p = r.by_throughput, r.by_p95
        if t is not None:
            text = f"By mean throughput{where}: n_spec={t.n_spec} ({t.value:,.1f} tok/s)"
            if t.best_n_spec != t.n_spec:
                text += (
                    f"; n_spec={t.best_n_spec} measured {t.best_value:,.1f} tok/s, within the "
                    "noise, so the smaller setting wins the tie"
                )
            elif t.tied:
                text += f"; ties within the noise: {', '.join(f'n={n}' for n in t.tied)}"
            if not t.noise_known:
                text += " (noise unknown for some points: repeat runs to judge ties)"
            lines.append(text + ".")
        if p is not None:
            text = f"By p95 latency{where}: n_spec={p.n_spec} ({p.value:,.0f} ms p95 E2EL)"
            if p.best_n_spec != p.n_spec:
                text += (
                    f"; n_spec={p.best_n_spec} measured {p.best_value:,.0f} ms, within the "
                    "noise, so the smaller setting wins the tie"
                )
            elif p.tied:
                text += f"; ties within the noise: {', '.join(f'n={n}' for n in p.tied)}"
            lines.append(text + ".")
        if r.differ:
            lines.append(
                "The two differ: the best mean is not the best tail. Pick by what your users "
                "feel (p95) or by what the box delivers (mean)."
            )
        elif t is not None and p is not None:
            lines.append("The two agree.")
    if summary.spec.grid:
        best = summary.best_serve
        if best:
            lines.append(
                "Fastest serve settings: "
                + " ".join(f"{k}={v}" for k, v in best)
                + " (by the throughput choice at the lowest concurrency)."
            )
    schedule = summary.schedule
    if schedule:
        lines.append(
            "Per batch size (num_speculative_tokens_per_batch_size, [bs_start, bs_end, k]): "
            + json.dumps(schedule)
            + "; extend the last range to your --max-num-seqs."
        )
    if summary.failures:
        lines.append(
            "Failed points: "
            + "; ".join(f"{label}: {cause}" for label, cause in summary.failures.items())
        )
    if summary.missing:
        lines.append(f"Missing runs: {', '.join(summary.missing)}")
    return lines


def summary_markdown(summary: SweepSummary) -> str:
    names = [name for name, _ in summary.spec.grid]
    lines = [
        "# specmon sweep" + (" (SIMULATED)" if summary.simulated else ""),
        "",
        "| "
        + "".join(f"{name} | " for name in names)
        + "n_spec | conc | repeats | mean tok/s | max tok/s | speedup | mean E2EL ms | "
        "p95 E2EL ms | AL | acceptance % |",
        "|" + "---:|" * (10 + len(names)),
    ]
    for c in summary.cells:
        serve = dict(c.serve)
        lines.append(
            "| "
            + "".join(f"{serve.get(name, '—')} | " for name in names)
            + f"{c.n_spec} | {c.concurrency} | {c.repeats} | {_pm(c.tok_s, 1)} | "
            f"{'—' if c.max_tok_s is None else f'{c.max_tok_s:,.1f}'} | "
            f"{'—' if c.speedup is None else f'x{c.speedup:.2f}'} | {_pm(c.e2el_mean_ms, 0)} | "
            f"{_pm(c.e2el_p95_ms, 0)} | {_pm(c.acceptance_length, 2)} | "
            f"{_pm(c.acceptance_rate, 1)} |"
        )
    lines += ["", "± is the standard deviation over the repeats.", ""]
    lines += [f"- {x}" for x in recommendation_lines(summary)]
    cmd = summary.command()
    if cmd:
        lines += ["", "```", cmd, "```"]
    return "\n".join(lines) + "\n"


@dataclass
class SweepOutcome:
    summary: SweepSummary
    interrupted: bool


def run_sweep(
    spec: SweepSpec,
    provider: ServerProvider,
    store: SweepStore,
    *,
    run: Callable[[Endpoint, BenchConfig, str], RunOutput],
    baseline_tok_s: float | None = None,
    on_event: Callable[[str], None] = lambda _s: None,
    created_at: Callable[[], str] = lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    specmon_version: str | None = None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> SweepOutcome:
    """Measure every run not yet in the store; returns the summary (also saved).
    `stop_requested`: checked after each run; True (a stop signal that came as the run ended,
    too late to interrupt it) ends the sweep as interrupted once that run is saved."""
    runs = store.load_runs()
    failures = store.load_failures()
    interrupted = False
    baselines: dict[tuple[tuple[tuple[str, str], ...], int], float] = {}
    for point in spec.point_list():
        if point.n_spec != 0:
            continue
        for c in spec.concurrencies:
            for r in range(1, spec.repeats + 1):
                res = runs.get(run_key(0, c, r, point.serve))
                if res is not None and res.summary.decode_tok_s.mean is not None:
                    baselines.setdefault((point.serve, c), res.summary.decode_tok_s.mean)
    for point in spec.point_list():
        if interrupted:
            break
        n = point.n_spec
        todo = [
            (c, r)
            for c in spec.concurrencies
            for r in range(1, spec.repeats + 1)
            if run_key(n, c, r, point.serve) not in runs
        ]
        if not todo:
            continue
        failures.pop(point.label, None)
        try:
            with provider.acquire(point) as endpoint:
                warmed = False
                for c, r in todo:
                    key = run_key(n, c, r, point.serve)
                    # Each repeat has its own prompts (no prefix-cache hits from the previous
                    # repeat), and the same prompts at every point (a paired comparison).
                    config = replace(
                        spec.config,
                        concurrency=c,
                        warmups=0 if warmed else spec.config.warmups,
                        seed=spec.config.seed + 1000 * (r - 1),
                    )
                    on_event(f"{point.label} concurrency={c} repeat {r}/{spec.repeats}")
                    try:
                        out = run(endpoint, config, f"n={n} c={c} r{r}/{spec.repeats} ")
                    except BenchError as exc:
                        failures[point.label] = str(exc)
                        on_event(f"{point.label} failed: {exc}")
                        break
                    warmed = True
                    base = (
                        baseline_tok_s
                        if baseline_tok_s is not None
                        else baselines.get((point.serve, c))
                    )
                    result = analyze(
                        out.events,
                        server=out.server,
                        config=config,
                        baseline_tok_s=base if n != 0 else None,
                        label=f"{point.label.replace('n_spec=', 'n=')} c={c} r{r}",
                        created_at=created_at(),
                        specmon_version=specmon_version,
                    )
                    if out.server.n_spec is not None and out.server.n_spec != n:
                        on_event(
                            f"warning: the server for n_spec={n} reports n_spec="
                            f"{out.server.n_spec} (check the --point URLs)"
                        )
                    if out.interrupted:
                        store.save_run(key, result, partial=True)
                        interrupted = True
                        break
                    store.save_run(key, result)
                    runs[key] = result
                    if n == 0 and result.summary.decode_tok_s.mean is not None:
                        baselines.setdefault((point.serve, c), result.summary.decode_tok_s.mean)
                    if result.errors.engine_dead:
                        failures[point.label] = f"engine dead: {result.errors.engine_dead_reason}"
                        on_event(f"{point.label} failed: engine dead")
                        break
                    store.save_failures(failures)
                    store.save_summary(summarize(spec, runs, failures))
                    if stop_requested():
                        interrupted = True
                        break
        except ServerUnavailable as exc:
            failures[point.label] = str(exc)
            on_event(f"{point.label} failed: {exc}")
        except KeyboardInterrupt:
            interrupted = True
        store.save_failures(failures)
    summary = summarize(spec, runs, failures, interrupted=interrupted)
    store.save_summary(summary)
    return SweepOutcome(summary, interrupted)
