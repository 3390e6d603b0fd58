"""`specmon sweep`'s run, once its command line (and a --resume folder) is read into a plan
(cli/sweep_cmd.py): each point benched with its live progress, every run saved as it finishes,
the table, the plot and the vLLM schedule written; and the checks that a resumed sweep's folder
never chooses what runs or where requests go (docs/bench.md).

Every failure is one line, `specmon sweep: ...` on stderr, with the exit status the command
documents."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specmon.core.stream_limits import StreamLimits
from specmon.runtime.host_plan import HostFlags
from specmon.runtime.one_line import fail

NAME = "sweep"


@dataclass(frozen=True)
class SweepPlan:
    """Everything a sweep runs from, read from the command line (and the --resume folder) once:
    the command runs from this, never from the parsed arguments."""

    spec: Any
    """The bench.sweep.SweepSpec: points, concurrencies, repeats, workload, URLs, host flags."""
    store: Any
    """The bench.sweep.SweepStore of the sweep folder."""
    provider: Any
    """Where each point's server comes from (attached URLs, or started per point)."""
    gpu: str
    baseline: float | None
    scrape_interval: float
    api_key: str | None = field(repr=False)
    stream_limits: StreamLimits
    plot: str | None
    emit_vllm_dynamic: str | None
    create: bool
    """A new sweep: the folder is created before the first point (a resumed one exists)."""


@dataclass(frozen=True)
class SweepDryRun:
    """`--dry-run`: each point's command is printed, nothing starts."""

    flags: HostFlags
    spec: Any


def run_sweep_plan(plan: SweepPlan | SweepDryRun) -> int:
    """Run the sweep the plan describes; the exit status (see `specmon sweep --help`)."""
    from specmon.bench.config import ConfigError
    from specmon.bench.sweep import SweepError

    if isinstance(plan, SweepDryRun):
        return _dry_run(plan.flags, plan.spec)
    if plan.create:
        try:
            plan.store.create(plan.spec)
        except (ConfigError, SweepError) as exc:
            return fail(NAME, str(exc))
    return _sweep(plan)


def described_servers(method: str | None, draft: str | None) -> dict[str, Any] | None:
    """Attached servers: what `--method`/`--draft` say they run (checked as host mode checks
    them), for the recommended command; None when neither is given."""
    if method is None and draft is None:
        return None
    from specmon.bench.config import ConfigError
    from specmon.sources.host.spec import DRAFT_METHODS, HostSpecError, resolve_method

    try:
        resolved = resolve_method(draft, method)
    except HostSpecError as exc:
        raise ConfigError(str(exc)) from None
    if draft is not None and resolved not in DRAFT_METHODS:
        raise ConfigError(
            f"--draft does not fit --method {resolved} (it drafts without a separate model); "
            f"methods that take --draft: {', '.join(DRAFT_METHODS)}"
        )
    return {"method": resolved, "draft": draft}


def resumed_host(
    given: HostFlags | None, n_spec: str | None, spec: Any, grid: Any, where: Path
) -> tuple[Any, HostFlags]:
    """The saved host-mode sweep with the host-mode flags of the command line (`given`; None
    when it gives none) and its --n-spec list (`n_spec`). The folder's recorded flags only
    confirm them: a sweep folder is shared, so it never chooses the program, environment or
    arguments that run (ConfigError, one line, saying what to give)."""
    from specmon.bench.config import ConfigError, parse_int_list
    from specmon.bench.host import (
        holds_secret,
        saved_host_flags,
        setup_differences,
        setup_words,
        shown_words,
    )
    from specmon.bench.limits import MAX_N_SPEC

    recorded = spec.host.get("flags")
    recorded = recorded if isinstance(recorded, dict) else {}
    if given is None:
        if holds_secret(recorded):
            raise ConfigError(
                "this sweep's host-mode flags held a secret, which is never saved: give the "
                "host-mode flags (--model ... -- ...) again with --resume"
            )
        raise ConfigError(
            f"{where} records how this sweep starts vLLM, and a sweep folder is not trusted "
            "to choose what runs: check them and give them again with --resume: "
            + shown_words(setup_words(recorded, spec.grid))
        )
    flags = given
    saved = saved_host_flags(flags)
    differ = setup_differences(recorded, saved, spec.grid, grid)
    if differ:
        raise ConfigError(
            f"{where} was measured with other host-mode flags than the command line gives: "
            + "; ".join(differ)
            + ". Give the folder's to resume it (check them: a sweep folder is not trusted to "
            "choose what runs), or start a new sweep with --out"
        )
    if n_spec is not None:
        more = parse_int_list("--n-spec", n_spec, 0, MAX_N_SPEC)
        spec = replace(spec, points=spec.points + tuple(n for n in more if n not in spec.points))
    return replace(spec, host={"flags": saved}), flags


def resumed_attached(
    spec: Any, store: Any, given: dict[int, str], described: dict[str, Any] | None
) -> Any:
    """The saved sweep of attached servers, with the servers of the command line. A URL the
    folder lists for a point still to measure, or a --method/--draft it describes, must be given
    again (ConfigError, one line, saying what): a shared folder never chooses where requests
    and the API key go, nor the draft model of the recommended command."""
    from specmon.bench.config import ConfigError
    from specmon.bench.host import shown_words
    from specmon.bench.sweep import SweepSpec, run_key

    runs = store.load_runs()
    pending = {
        point.n_spec
        for point in spec.point_list()
        for c in spec.concurrencies
        for r in range(1, spec.repeats + 1)
        if run_key(point.n_spec, c, r, point.serve) not in runs
    }
    words: list[str] = []
    for n, url in sorted(spec.urls.items()):
        if n in pending and n not in given:
            words += ["--point", f"{n}={url}"]
    told = spec.described or {}
    if described is None and (told.get("method") or told.get("draft")):
        for flag, key in (("--method", "method"), ("--draft", "draft")):
            if told.get(key):
                words += [flag, str(told[key])]
    if words:
        raise ConfigError(
            f"{store.folder / 'sweep.json'} names servers (or the draft) that the command line "
            "does not give, and a sweep folder is not trusted to choose where requests and the "
            "API key go: check them and give them again with --resume: " + shown_words(words)
        )
    return SweepSpec(
        spec.points + tuple(n for n in given if n not in spec.points),
        spec.concurrencies,
        spec.repeats,
        spec.config,
        {**spec.urls, **given},
        described=described,
    )


def _dry_run(flags: HostFlags, spec: Any) -> int:
    """Print each point's exact command line; start nothing."""
    from specmon.bench.host import point_flags
    from specmon.core.errors import SpecmonError
    from specmon.runtime.host_plan import dry_run_text, plan_host

    for point in spec.point_list():
        try:
            plan = plan_host(point_flags(flags, point), launching=False)
        except SpecmonError as exc:
            return fail(NAME, f"{point.label}: {exc}")
        print(f"# {point.label}")
        print(dry_run_text(plan))
    return 0


def _sweep(plan: SweepPlan) -> int:
    from rich.console import Console

    from specmon import __version__
    from specmon.bench.interruptible import run_interruptible, stop_requested
    from specmon.bench.plot import PlotUnavailable, write_plot
    from specmon.bench.render import print_sweep, progress_for
    from specmon.bench.runner import run_bench
    from specmon.bench.sweep import SweepError, run_sweep

    store = plan.store
    print(f"specmon sweep: saving to {store.folder}", file=sys.stderr)

    def one(endpoint: Any, config: Any, label: str) -> Any:
        display = progress_for(sys.stderr, label=label)
        with display:
            return run_interruptible(
                run_bench(
                    endpoint,
                    config,
                    api_key=plan.api_key,
                    gpu=plan.gpu,
                    progress=display,
                    scrape_interval=plan.scrape_interval,
                    stream_limits=plan.stream_limits,
                )
            )

    try:
        outcome = run_sweep(
            plan.spec,
            plan.provider,
            store,
            run=one,
            baseline_tok_s=plan.baseline,
            on_event=lambda s: print(f"specmon sweep: {s}", file=sys.stderr, flush=True),
            specmon_version=__version__,
            stop_requested=stop_requested,
        )
    except SweepError as exc:  # a file of the folder that cannot be written (or is a link)
        return fail(NAME, str(exc), 1)
    width = None if sys.stdout.isatty() else 140
    print_sweep(outcome.summary, Console(highlight=False, width=width))
    if plan.plot and outcome.summary.cells:
        try:
            write_plot(outcome.summary, plan.plot)
            print(f"specmon sweep: plot written to {plan.plot}", file=sys.stderr)
        except (PlotUnavailable, OSError) as exc:
            print(f"specmon sweep: no plot: {exc}", file=sys.stderr)
    emitted = True
    if plan.emit_vllm_dynamic and outcome.summary.cells:
        from specmon.bench.vllm_dynamic import emit

        emitted, note = emit(outcome.summary, plan.emit_vllm_dynamic)
        print(f"specmon sweep: {note}", file=sys.stderr)
    if outcome.interrupted:
        return fail(NAME, f"interrupted; continue with --resume {store.folder}", 130)
    return 0 if outcome.summary.cells and emitted else 1
