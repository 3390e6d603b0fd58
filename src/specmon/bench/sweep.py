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

A sweep folder is shared (attached to issues, copied between machines), so what it holds is
untrusted when read back: every number is range-checked (bench.limits; a bad value is one line
naming the file and the field), no file is written through a symbolic link (a symlinked target or
runs/ folder is refused; the temporary files have random names: data_files.write_atomic), and
the folder never chooses what runs or where requests go: that is the command line's
(bench/sweep_run.py compares, see docs/bench.md).

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
from specmon.bench.config import (
    MAX_CONCURRENCY,
    MAX_REPEATS,
    MAX_TEXT_CHARS,
    BenchConfig,
    ConfigError,
    ServeGrid,
    check_config,
    grid_combinations,
    parse_serve_grid,
)
from specmon.bench.limits import MAX_N_SPEC, LimitError, check_int
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
from specmon.core.display_text import DASH, MAX_NUMBER_CHARS, clean, fit
from specmon.core.safe_json import JsonError, loads_bounded
from specmon.sources.data_files import new_file_mode, read_at_most, write_atomic

FORMAT = "specmon-sweep"
VERSION = 1

MAX_SPEC_BYTES = 16 * 1024 * 1024
"""The largest sweep.json or failed.json read."""

WRITTEN = ("sweep.json", "failed.json", "summary.json", "summary.csv", "summary.md")
"""The folder's own files (besides runs/): a symbolic link in their place is refused."""


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
        """The settings of a sweep.json, every value checked (SweepError-free: LimitError
        naming the field, ValueError/TypeError/KeyError for a wrong shape)."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise SweepError("not a specmon sweep folder (sweep.json has another format)")
        points = _int_list(d["points"], "points", 0, MAX_N_SPEC)
        concurrencies = _int_list(d["concurrencies"], "concurrencies", 1, MAX_CONCURRENCY)
        repeats = check_int(d["repeats"], "repeats", 1, MAX_REPEATS)
        config = check_config(BenchConfig.from_dict(_mapping(d["config"], "config")))
        urls: dict[int, str] = {}
        for key, url in _mapping(d.get("urls") or {}, "urls").items():
            n = int(key) if str(key).isdigit() else -1
            if n not in points:
                raise LimitError(f"urls {key!r:.40} is not one of the points")
            urls[n] = _text(url, f"urls[{n}]")
        grid_items = []
        for item in d.get("grid") or ():
            name, values = item
            grid_items.append(f"{_text(name, 'grid')}={','.join(_text(v, 'grid') for v in values)}")
        try:
            grid = parse_serve_grid(grid_items)
        except ConfigError as exc:
            raise LimitError(f"grid: {exc}") from None
        host = d.get("host")
        described = d.get("described")
        return SweepSpec(
            points=points,
            concurrencies=concurrencies,
            repeats=repeats,
            config=config,
            urls=urls,
            grid=grid,
            host=_mapping(host, "host") if host is not None else None,
            described=_mapping(described, "described") if described is not None else None,
        )


def _mapping(value: Any, field_name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LimitError(f"{field_name} is not an object")
    return value


def _text(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise LimitError(f"{field_name} is not a text of at most {MAX_TEXT_CHARS:,} characters")
    return value


def _int_list(value: Any, field_name: str, lo: int, hi: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or len(value) > hi - lo + 1:
        raise LimitError(f"{field_name} is not a list of 1 to {hi - lo + 1} integers")
    out: list[int] = []
    for i, item in enumerate(value):
        n = check_int(item, f"{field_name}[{i}]", lo, hi)
        if n in out:
            raise LimitError(f"{field_name} lists {n} twice")
        out.append(n)
    return tuple(out)


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
        self.check_links()
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"cannot create {self.folder}: {exc.strerror or exc}") from None
        self._write("sweep.json", json.dumps(_scrubbed(spec.as_dict(), spec), indent=1))

    def check_links(self) -> None:
        """SweepError when runs/, one of the folder's own files or a run file is a symbolic
        link: a shared folder could point them at the user's files, which the sweep would then
        read or replace."""
        links = [self.runs] if self.runs.is_symlink() else []
        links += [self.folder / name for name in WRITTEN if (self.folder / name).is_symlink()]
        if not links and self.runs.is_dir():
            links = sorted(p for p in self.runs.glob("*.json") if p.is_symlink())
        if links:
            raise SweepError(
                f"{links[0]} is a symbolic link: a sweep folder's files and runs/ must be its "
                "own (never written or read through a link); remove it to go on"
            )

    def load_spec(self) -> SweepSpec:
        path = self.folder / "sweep.json"
        if not path.exists():
            raise SweepError(f"{self.folder} holds no sweep (no sweep.json)")
        self.check_links()
        data = self._read_json(path)
        try:
            return SweepSpec.from_dict(data)
        except LimitError as exc:
            raise SweepError(f"{path}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise SweepError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None

    def _read_json(self, path: Path) -> Any:
        """A small JSON file of the folder, read without following a link (SweepError)."""
        try:
            raw = read_at_most(path, MAX_SPEC_BYTES, follow_link=False)
        except OSError as exc:
            raise SweepError(f"cannot read {path}: {exc.strerror or exc}") from None
        if raw is None:
            raise SweepError(f"cannot read {path}: it does not exist")
        if len(raw) > MAX_SPEC_BYTES:
            raise SweepError(f"{path} is larger than {MAX_SPEC_BYTES // 2**20} MiB")
        try:
            return loads_bounded(raw)
        except JsonError as exc:
            raise SweepError(f"{path} is damaged ({exc})") from None

    def _write(self, name: str, text: str) -> None:
        """Replace the folder's file `name` whole (atomic: a Ctrl-C never leaves half a file;
        a random, exclusively created temporary: nothing planted is written through; a
        symbolic link at `name` or as runs/ is refused)."""
        path = self.folder / name
        if name.startswith("runs/") and self.runs.is_symlink():
            raise SweepError(f"{self.runs} is a symbolic link: refused (never written through)")
        try:
            write_atomic(path, text, mode=new_file_mode(), refuse_link=True)
        except OSError as exc:
            raise SweepError(f"cannot write {path}: {exc.strerror or exc}") from None

    def save_run(self, key: str, result: BenchResult, *, partial: bool = False) -> Path:
        name = f"runs/{key}{'.partial' if partial else ''}.json"
        self._write(name, result.to_json() + "\n")
        if not partial:  # measured again in full: the interrupted attempt is superseded
            (self.runs / f"{key}.partial.json").unlink(missing_ok=True)
        return self.folder / name

    def load_runs(self, on_bad: Callable[[str], None] | None = None) -> dict[str, BenchResult]:
        """The finished runs. A run file that cannot be used (damaged, a value out of range, a
        link) is left out, so it is measured again; `on_bad` gets one line naming it and why."""
        out: dict[str, BenchResult] = {}
        if not self.runs.is_dir() or self.runs.is_symlink():
            return out
        for path in sorted(self.runs.glob("n*-c*-r*.json")):
            if path.name.endswith(".partial.json"):
                continue
            try:
                if path.is_symlink():
                    raise ResultError(f"{path} is a symbolic link: not read")
                out[path.name.removesuffix(".json")] = load_result(path)
            except ResultError as exc:
                if on_bad is not None:
                    on_bad(clean(str(exc)))
        return out

    def load_failures(self) -> dict[str, str]:
        path = self.folder / "failed.json"
        try:
            data = self._read_json(path)
        except SweepError:
            return {}
        if not isinstance(data, dict):
            return {}
        # Folders of the first version keyed failures by n_spec alone; the causes are shown
        # (one line each, control characters removed).
        return {
            clean(f"n_spec={k}" if str(k).isdigit() else str(k))[:MAX_TEXT_CHARS]: clean(str(v))[
                :MAX_TEXT_CHARS
            ]
            for k, v in data.items()
        }

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


def _num(value: float | None, digits: int) -> str:
    """A number with thousands separators, never wider than MAX_NUMBER_CHARS (display_text.fit)."""
    return fit(value, f",.{digits}f", MAX_NUMBER_CHARS)


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
            text = f"By mean throughput{where}: n_spec={t.n_spec} ({_num(t.value, 1)} tok/s)"
            if t.best_n_spec != t.n_spec:
                text += (
                    f"; n_spec={t.best_n_spec} measured {_num(t.best_value, 1)} tok/s, within the "
                    "noise, so the smaller setting wins the tie"
                )
            elif t.tied:
                text += f"; ties within the noise: {', '.join(f'n={n}' for n in t.tied)}"
            if not t.noise_known:
                text += " (noise unknown for some points: repeat runs to judge ties)"
            lines.append(text + ".")
        if p is not None:
            text = f"By p95 latency{where}: n_spec={p.n_spec} ({_num(p.value, 0)} ms p95 E2EL)"
            if p.best_n_spec != p.n_spec:
                text += (
                    f"; n_spec={p.best_n_spec} measured {_num(p.best_value, 0)} ms, within the "
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
            f"{_num(c.max_tok_s, 1)} | "
            f"{DASH if c.speedup is None else 'x' + _num(c.speedup, 2)} | "
            f"{_pm(c.e2el_mean_ms, 0)} | "
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
    runs = store.load_runs(on_bad=lambda line: on_event(f"{line}; measured again"))
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
