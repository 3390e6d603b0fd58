"""`specmon bench`'s run, once its command line is read into a plan (cli/bench_cmd.py): the
bench of an attached or a started server with its live progress, a context sweep, the report of
a recording, and the result written to every output asked for (docs/bench.md).

Every failure is one line, `specmon bench: ...` on stderr, with the exit status the command
documents."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specmon.core.stream_limits import StreamLimits
from specmon.runtime.one_line import fail

if TYPE_CHECKING:
    from specmon.runtime.host_plan import HostFlags

NAME = "bench"


def check_baseline(value: str | None) -> float | None:
    from specmon.bench.config import parse_float

    return None if value is None else parse_float("--baseline", value, 0, 1e7, lo_open=True)


def check_output_paths(*paths: str | None) -> None:
    """Every output file's folder must exist before a long run starts."""
    from pathlib import Path

    from specmon.bench.config import ConfigError

    for p in paths:
        if p is not None and not Path(p).resolve().parent.is_dir():
            raise ConfigError(f"cannot write {p}: its folder does not exist")


@dataclass(frozen=True)
class Outputs:
    """Where the result goes besides the terminal: --json, --csv, --markdown (None: not asked)."""

    json: str | None
    csv: str | None
    markdown: str | None
    label: str | None
    """--label: the run's name in compare tables."""


@dataclass(frozen=True)
class BenchRun:
    """One measured run, read from the command line once (the server comes separately:
    attached, or started in host mode)."""

    config: Any
    """The bench.config.BenchConfig (the workload)."""
    gpu: str
    baseline: float | None
    api_key: str | None = field(repr=False)
    scrape_interval: float
    stream_limits: StreamLimits
    record: str | None
    outputs: Outputs
    context_sweep: str | None = None
    """--context-sweep LENGTHS: the bench once per prompt length (bench.context_sweep)."""


@dataclass(frozen=True)
class BenchAttached:
    """Bench a running server."""

    bench: BenchRun
    endpoint: Any
    """The bench.servers.Endpoint (its URL and /metrics)."""


@dataclass(frozen=True)
class BenchHosted:
    """Host mode: start the server the flags describe, bench it, stop it."""

    bench: BenchRun
    flags: HostFlags


@dataclass(frozen=True)
class BenchDryRun:
    """Host mode's --dry-run: print the command and the environment, start nothing."""

    flags: HostFlags


@dataclass(frozen=True)
class BenchReplay:
    """--replay FILE: the report of a recorded bench."""

    path: str
    baseline: float | None
    outputs: Outputs


BenchPlan = BenchAttached | BenchHosted | BenchDryRun | BenchReplay


def run_bench_plan(plan: BenchPlan) -> int:
    """Run the bench the plan describes; the exit status (see `specmon bench --help`)."""
    match plan:
        case BenchAttached(bench=bench, endpoint=endpoint):
            return _live(bench, endpoint)
        case BenchHosted(bench=bench, flags=flags):
            return _hosted(bench, flags)
        case BenchDryRun(flags=flags):
            return _dry_run(flags)
        case BenchReplay():
            return _replay(plan)


def _dry_run(flags: HostFlags) -> int:
    from specmon.core.errors import SpecmonError
    from specmon.runtime.host_plan import dry_run_text, plan_host

    try:
        print(dry_run_text(plan_host(flags, launching=False)))
    except SpecmonError as exc:
        return fail(NAME, str(exc))
    return 0


def _hosted(bench: BenchRun, flags: HostFlags) -> int:
    """Host mode: start the server, bench it, stop it (its whole process group)."""
    from specmon.bench.host import hosted
    from specmon.bench.servers import ServerUnavailable

    try:
        with hosted(flags, "vllm") as endpoint:
            return _live(bench, endpoint)
    except ServerUnavailable as exc:
        return fail(NAME, str(exc), 1)
    except KeyboardInterrupt:
        print("specmon bench: interrupted while the server started; stopped it", file=sys.stderr)
        return 130


def _live(bench: BenchRun, endpoint: Any) -> int:
    import datetime as dt

    from specmon import __version__
    from specmon.bench.analysis import analyze
    from specmon.bench.interruptible import run_interruptible
    from specmon.bench.render import progress_for
    from specmon.bench.runner import BenchError, run_bench
    from specmon.core.errors import RecordingError

    if bench.context_sweep is not None:
        return _context_sweep(bench, endpoint)
    display = progress_for(sys.stderr)
    try:
        with display:
            out = run_interruptible(
                run_bench(
                    endpoint,
                    bench.config,
                    api_key=bench.api_key,
                    gpu=bench.gpu,
                    record=bench.record,
                    baseline_tok_s=bench.baseline,
                    progress=display,
                    scrape_interval=bench.scrape_interval,
                    stream_limits=bench.stream_limits,
                )
            )
    except (BenchError, RecordingError) as exc:
        return fail(NAME, str(exc), 1)
    except KeyboardInterrupt:
        print(
            "specmon bench: interrupted before the measured phase; nothing measured",
            file=sys.stderr,
        )
        return 130
    result = analyze(
        out.events,
        server=out.server,
        config=bench.config,
        baseline_tok_s=bench.baseline,
        label=bench.outputs.label,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        specmon_version=__version__,
    )
    return _report(bench.outputs, result)


def _context_sweep(bench: BenchRun, endpoint: Any) -> int:
    """--context-sweep: the bench at each prompt length, then acceptance by context."""
    import asyncio
    import dataclasses
    import json
    from pathlib import Path

    from specmon.bench.analysis import analyze
    from specmon.bench.context_sweep import parse_lengths, render, run_context_sweep
    from specmon.bench.render import progress_for
    from specmon.bench.runner import BenchError, run_bench

    display = progress_for(sys.stderr)
    lengths = parse_lengths(bench.context_sweep or "")

    async def one(cfg: Any) -> Any:
        out = await run_bench(
            endpoint,
            cfg,
            api_key=bench.api_key,
            gpu=bench.gpu,
            progress=display,
            scrape_interval=bench.scrape_interval,
            stream_limits=bench.stream_limits,
            dataset_context=cfg.dataset != "random",
        )
        result = analyze(out.events, server=out.server, config=cfg, baseline_tok_s=bench.baseline)
        return out.events, result

    try:
        with display:
            _, sweep = asyncio.run(run_context_sweep(bench.config, lengths, one))
    except BenchError as exc:
        return fail(NAME, str(exc), 1)
    except KeyboardInterrupt:
        return fail(NAME, "context sweep interrupted", 130)
    print(render(sweep))
    if bench.outputs.json:
        try:
            _write_whole(
                Path(bench.outputs.json),
                json.dumps({"context_sweep": dataclasses.asdict(sweep)}, indent=1) + "\n",
            )
        except OSError as exc:
            return fail(NAME, f"cannot write the output: {exc}", 1)
    return 0 if all(p.completed for p in sweep.points) else 1


def _replay(plan: BenchReplay) -> int:
    from specmon.bench.analysis import analyze
    from specmon.bench.config import BenchConfig
    from specmon.bench.result import ServerInfo
    from specmon.core.display_text import DASH
    from specmon.core.errors import RecordingError
    from specmon.sources.recording_player import read_recording

    path = plan.path
    try:
        recording = read_recording(path)
    except (RecordingError, OSError) as exc:
        return fail(NAME, f"cannot replay {path}: {exc}", 1)
    except (RecursionError, MemoryError, ValueError) as exc:
        # The reader's own checks did not catch it (JSON nested thousands deep, a huge line).
        why = "JSON nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
        return fail(NAME, f"cannot replay {path}: unreadable ({why})", 1)
    info = recording.info
    bench = info.extra.get("bench") if isinstance(info.extra, dict) else None
    if not isinstance(bench, dict):
        print(
            f"specmon bench: {path} is not a bench recording (no bench settings in its header)",
            file=sys.stderr,
        )
        return 1
    for p in recording.problems:
        print(f"specmon bench: {path}: {p}", file=sys.stderr)
    config = BenchConfig.from_dict(bench)
    server = ServerInfo(
        url=info.server or DASH,
        model=info.model,
        vllm_version=info.vllm_version,
        simulated=info.simulated,
        n_spec=info.n_spec,
        gpu=info.gpu,
    )
    baseline = plan.baseline
    if baseline is None and recording.baseline is not None:
        baseline = recording.baseline.tok_s  # the one the recorded bench was judged against
    result = analyze(
        recording.events,
        server=server,
        config=config,
        baseline_tok_s=baseline,
        label=plan.outputs.label,
        created_at=recording.started_at,
    )
    return _report(plan.outputs, result)


def _report(outputs: Outputs, result: Any) -> int:
    from pathlib import Path

    from specmon.bench.render import print_summary
    from specmon.bench.result import requests_csv, summary_markdown

    print_summary(result)
    written: list[str] = []
    try:
        for path, render in (
            (outputs.json, lambda: result.to_json() + "\n"),
            (outputs.csv, lambda: requests_csv(result)),
            (outputs.markdown, lambda: summary_markdown(result)),
        ):
            if path:
                _write_whole(Path(path), render())
                written.append(path)
    except OSError as exc:
        return fail(NAME, f"cannot write the output: {exc}", 1)
    if result.errors.interrupted:
        where = f"; written to {', '.join(written)}" if written else ""
        return fail(NAME, f"interrupted: what was measured is kept{where}", 130)
    if result.errors.engine_dead or result.summary.completed == 0:
        return 1
    return 0


def _write_whole(path: Any, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it: a run stopped by force while
    writing leaves the previous file or the new one, never half of one. A path that is not a
    regular file (/dev/stdout, a pipe) is written directly."""
    if path.exists() and not path.is_file():
        path.write_text(text, encoding="utf-8")
        return
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
