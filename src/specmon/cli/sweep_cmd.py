"""`specmon sweep`: find the best num_speculative_tokens, the seeds' way, in one command.

Host mode: specmon starts `vllm serve` for each point, waits for /health, warms up, benches,
stops the whole process group and goes on with the next point (n_spec 0 is vanilla: no
speculative config):

    specmon sweep --model M --draft D --n-spec 0,4,8 [--preset NAME] [-- extra vllm serve args]
    specmon sweep --preset NAME --n-spec 0,8,13 --max-num-batched-tokens 4096,8192

A serve grid (--max-num-batched-tokens 4096,8192, or generally --serve-grid NAME=V1,V2,
repeatable) is crossed with --n-spec: one server per combination, and the table and the
recommendation per combination. Or attached servers, one per n_spec setting:

    specmon sweep --point 0=http://127.0.0.1:8000 --point 8=http://127.0.0.1:8001 ...
    specmon sweep --n-spec 0,8,13 --attach URL0 --attach URL8 --attach URL13

Each point is benched --repeats times (warm-ups before its first run) at each --concurrency
(1,4,16 → also a per-batch-size schedule). Prints the table (mean and max tok/s, speedup against
n=0, mean and p95 E2EL, AL and acceptance, each ± its spread over the repeats), a bar chart, the
recommendation by mean throughput and by p95 latency (ties within the noise go to the smaller
n_spec), and the `vllm serve` command line of the recommended setting.

Every finished run is saved in the sweep folder (--out, default ./specmon-sweep-DATE-TIME) as it
finishes; Ctrl-C (or SIGTERM, SIGHUP) keeps what was measured: the finished runs, and the run in
progress as runs/....partial.json (marked interrupted), which --resume measures again in full.
`--resume DIR` goes on from there with the settings saved in DIR. A sweep folder is shared, so
it never chooses what runs or where requests go: host mode needs the host-mode flags given again
(the same --model/--preset, --draft, --method, --spec-option, --vllm, --env, grid and `-- ARGS`
as DIR records; refused in one line, showing them, otherwise), and the server of each point still
to measure is given again (--point N=URL; it replaces the saved URL; a URL only DIR lists is never
sent a request, nor the API key). Every number read from DIR is range-checked, and no file in it
is written through a symbolic link. A point whose server fails to
start (or dies) is recorded as failed with its cause, the sweep goes on and the summary names the
missing runs. Ctrl-C stops the server of the point in progress. See docs/bench.md.

Exit status: 0 done; 1 no point could be measured; 2 bad arguments; 130 interrupted by Ctrl-C,
143 by SIGTERM, 129 by SIGHUP.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from specmon.bench.sweep_run import (
    SweepDryRun,
    SweepPlan,
    described_servers,
    resumed_attached,
    resumed_host,
)
from specmon.cli.args import PlanError, add_command, server_url
from specmon.cli.bench_cmd import add_server_arguments, add_workload_arguments
from specmon.cli.host_args import add_host_arguments
from specmon.cli.stream_args import stream_limits_from
from specmon.core.credentials import resolve_api_key
from specmon.runtime.host_plan import HostFlags

NAME = "sweep"
SUMMARY = "sweep num_speculative_tokens (host mode or attached servers) and recommend a setting"


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        NAME,
        SUMMARY,
        __doc__,
        conflict_handler="resolve",  # the sweep's --n-spec (a list) replaces host mode's
    )
    add_host_arguments(p, model=False)
    p.add_argument(
        "--point",
        action="append",
        default=[],
        metavar="N=URL",
        help="a point: n_spec N served at URL (repeat for each point)",
    )
    p.add_argument(
        "--n-spec",
        default=None,
        metavar="N,N,...",
        help="n_spec values (0 = vanilla): host mode starts one server per value; or paired in "
        "order with --attach URLs",
    )
    p.add_argument(
        "--serve-grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="host mode: a `vllm serve` option's values, crossed with --n-spec (repeatable), "
        "e.g. max_num_batched_tokens=4096,8192",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        default=None,
        metavar="V1,V2",
        help="host mode: shorthand for --serve-grid max_num_batched_tokens=V1,V2",
    )
    p.add_argument(
        "--attach",
        action="append",
        default=[],
        type=server_url,
        metavar="URL",
        help="server of the next --n-spec value (repeat)",
    )
    p.add_argument("--repeats", default="3", metavar="N", help="runs per point (default 3)")
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="sweep folder (default ./specmon-sweep-DATE-TIME)",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the sweep in DIR (its host-mode flags, or the URLs of the points still to "
        "measure, given again: a folder never chooses what runs or where requests go)",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also draw FILE (.png or .svg; needs matplotlib: pip install 'specmon[plot]')",
    )
    p.add_argument(
        "--emit-vllm-dynamic",
        default=None,
        metavar="FILE",
        help="also write the per-batch-size schedule as vLLM's speculative config (JSON for "
        "--speculative-config; needs --concurrency with two or more values)",
    )
    add_server_arguments(p, single=False)
    add_workload_arguments(p)
    # --concurrency takes a list here (1,4,16): one schedule entry per value.
    for action in p._actions:
        if action.dest == "concurrency":
            action.help = "requests in flight, or a list (1,4,16) for a per-batch-size schedule"
            action.metavar = "N[,N...]"


def plan_from(args: argparse.Namespace) -> SweepPlan | SweepDryRun:
    """The sweep the command line asks for; PlanError (one line, exit 2) for a setting that
    cannot be."""
    from specmon.bench.config import ConfigError
    from specmon.bench.plot import PlotUnavailable
    from specmon.bench.sweep import SweepError

    try:
        return plan_sweep(args)
    except (ConfigError, PlotUnavailable, SweepError) as exc:
        raise PlanError(str(exc)) from None


def plan_sweep(args: argparse.Namespace) -> SweepPlan | SweepDryRun:
    """The sweep the command line asks for (or its --dry-run). ConfigError, PlotUnavailable or
    SweepError (one line) for a setting that cannot be."""
    from specmon.bench.command import check_baseline
    from specmon.bench.config import (
        MAX_CONCURRENCY,
        MAX_REPEATS,
        ConfigError,
        parse_int,
        parse_int_list,
    )
    from specmon.bench.plot import check_plot_target
    from specmon.bench.servers import AttachProvider, StartingProvider, parse_points
    from specmon.bench.sweep import SweepSpec, SweepStore
    from specmon.cli.bench_cmd import scrape_interval, workload_config
    from specmon.cli.host_args import host_requested
    from specmon.cli.session_setup import gpu_choice

    baseline = check_baseline(args.baseline)
    if args.plot:
        check_plot_target(args.plot)
    if args.emit_vllm_dynamic:
        from specmon.bench.vllm_dynamic import check_target

        check_target(args.emit_vllm_dynamic)
    grid = _grid(args)
    host = not args.point and not args.attach and host_requested(args)
    api_key = args.api_key
    if args.resume is not None:
        if args.out is not None:
            raise ConfigError("give --out or --resume, not both")
        store = SweepStore(args.resume)
        spec = store.load_spec()
        host = spec.host is not None
    if host:
        if args.resume is None:
            if args.n_spec is None:
                raise ConfigError(
                    "--n-spec N,N,... is needed: the n_spec values to sweep (0 = vanilla)"
                )
            flags = _given_host_flags(args)
            spec = _host_spec(args, flags, grid)
            store = SweepStore(args.out or _default_folder())
        else:
            given_flags = _given_host_flags(args) if host_requested(args) else None
            where = store.folder / "sweep.json"
            spec, flags = resumed_host(given_flags, args.n_spec, spec, grid, where)
        if args.dry_run:
            return SweepDryRun(flags, spec)
        from specmon.bench.host import check_points, host_point, served_api_key

        identity = check_points(flags, spec.point_list())
        spec = replace(spec, host={**spec.host, **identity})  # what the command line starts
        if api_key is None:  # the servers' own key, given after `--`
            api_key = served_api_key(flags)
        provider: Any = StartingProvider(spec.point_list(), lambda point: host_point(flags, point))
        gpu_urls = [f"http://{flags.host or '127.0.0.1'}:1"]
    else:
        if grid:
            raise ConfigError(
                "--serve-grid/--max-num-batched-tokens need host mode (--model M or "
                "--preset NAME): specmon must start a server per combination"
            )
        if args.vllm_args:
            raise ConfigError(
                "extra `vllm serve` arguments after `--` need host mode (--model M or "
                "--preset NAME)"
            )
        given = (
            parse_points(args.point, args.n_spec, args.attach)
            if args.point or args.n_spec or args.attach or args.resume is None
            else {}
        )
        described = described_servers(args.method, args.draft)
        if args.resume is not None:
            spec = resumed_attached(spec, store, given, described)
        else:
            concs = parse_int_list("--concurrency", args.concurrency, 1, MAX_CONCURRENCY)
            config = workload_config(args, concurrency=concs[0])
            repeats = parse_int("--repeats", args.repeats, 1, MAX_REPEATS)
            spec = SweepSpec(tuple(given), concs, repeats, config, given, described=described)
            store = SweepStore(args.out or _default_folder())
        try:  # only the URLs of the command line: a folder's are never sent a request (or key)
            provider = AttachProvider(given)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        gpu_urls = list(given.values())
    return SweepPlan(
        spec=spec,
        store=store,
        provider=provider,
        gpu=gpu_choice(args.gpu, gpu_urls),
        baseline=baseline,
        scrape_interval=scrape_interval(args),
        api_key=resolve_api_key(api_key),  # the key resolved once, here
        stream_limits=stream_limits_from(args),
        plot=args.plot,
        emit_vllm_dynamic=args.emit_vllm_dynamic,
        create=args.resume is None,
    )


def _given_host_flags(args: argparse.Namespace) -> HostFlags:
    """The host-mode flags given (the sweep's own --n-spec list is not one; no --port: a free
    port per point, since a stopped server's port may linger)."""
    flags = replace(HostFlags.of(args), n_spec=None)
    return flags if flags.port is not None else replace(flags, port=0)


def _grid(args: argparse.Namespace) -> Any:
    from specmon.bench.config import parse_serve_grid

    items = list(args.serve_grid)
    if args.max_num_batched_tokens is not None:
        items.append(f"max_num_batched_tokens={args.max_num_batched_tokens}")
    return parse_serve_grid(items)


def _host_spec(args: argparse.Namespace, flags: HostFlags, grid: Any) -> Any:
    """A new host-mode sweep's settings (ConfigError on a bad value)."""
    from specmon.bench.config import MAX_CONCURRENCY, MAX_REPEATS, parse_int, parse_int_list
    from specmon.bench.host import check_points, saved_host_flags
    from specmon.bench.limits import MAX_N_SPEC
    from specmon.bench.sweep import SweepSpec
    from specmon.cli.bench_cmd import workload_config

    points = parse_int_list("--n-spec", args.n_spec, 0, MAX_N_SPEC)
    concs = parse_int_list("--concurrency", args.concurrency, 1, MAX_CONCURRENCY)
    config = workload_config(args, concurrency=concs[0], hosted=True)
    repeats = parse_int("--repeats", args.repeats, 1, MAX_REPEATS)
    spec = SweepSpec(points, concs, repeats, config, {}, grid)
    identity = check_points(flags, spec.point_list())
    return SweepSpec(
        points, concs, repeats, config, {}, grid, {"flags": saved_host_flags(flags), **identity}
    )


def _default_folder() -> str:
    import datetime as dt

    return "specmon-sweep-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def run(plan: SweepPlan | SweepDryRun) -> int:
    from specmon.bench.sweep_run import run_sweep_plan

    return run_sweep_plan(plan)
