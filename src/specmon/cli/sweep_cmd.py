"""`specmon sweep`: find the best num_speculative_tokens, the seeds' way, in one command.

Points are attached servers, one per n_spec setting (host mode, where specmon restarts
`vllm serve` per point, is not built yet):

    specmon sweep --point 0=http://127.0.0.1:8000 --point 8=http://127.0.0.1:8001 ...
    specmon sweep --n-spec 0,8,13 --attach URL0 --attach URL8 --attach URL13

Each point is benched --repeats times (warm-ups before its first run) at each --concurrency
(1,4,16 → also a per-batch-size schedule). Prints the table (mean and max tok/s, speedup against
n=0, mean and p95 E2EL, AL and acceptance, each ± its spread over the repeats), a bar chart, the
recommendation by mean throughput and by p95 latency (ties within the noise go to the smaller
n_spec), and the `vllm serve` command line of the recommended setting.

Every finished run is saved in the sweep folder (--out, default ./specmon-sweep-DATE-TIME) as it
finishes; Ctrl-C keeps what was measured and `--resume DIR` goes on from there (with the
settings saved in DIR; URLs given again replace the saved ones). A point whose server fails is
recorded as failed with its cause and the sweep goes on. See docs/bench.md.

Exit status: 0 done; 1 no point could be measured; 2 bad arguments; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specmon.cli.bench_cmd import add_server_arguments, add_workload_arguments, error

NAME = "sweep"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="sweep num_speculative_tokens over attached servers and recommend a setting",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
        help="n_spec values, paired in order with --attach URLs",
    )
    p.add_argument(
        "--attach",
        action="append",
        default=[],
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
    p.add_argument("--resume", default=None, metavar="DIR", help="continue the sweep in DIR")
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also draw FILE (.png or .svg; needs matplotlib: pip install 'specmon[plot]')",
    )
    add_server_arguments(p, single=False)
    add_workload_arguments(p)
    # --concurrency takes a list here (1,4,16): one schedule entry per value.
    for action in p._actions:
        if action.dest == "concurrency":
            action.help = "requests in flight, or a list (1,4,16) for a per-batch-size schedule"
            action.metavar = "N[,N...]"


def run(args: argparse.Namespace) -> int:
    from specmon.bench.config import ConfigError, parse_int, parse_int_list
    from specmon.bench.plot import PlotUnavailable, check_plot_target
    from specmon.bench.servers import AttachProvider, parse_points
    from specmon.bench.sweep import SweepError, SweepSpec, SweepStore
    from specmon.cli.bench_cmd import check_baseline, check_gpu, scrape_interval, workload_config

    try:
        baseline = check_baseline(args.baseline)
        if args.plot:
            check_plot_target(args.plot)
        given = (
            parse_points(args.point, args.n_spec, args.attach)
            if args.point or args.n_spec or args.attach or args.resume is None
            else {}
        )
        if args.resume is not None:
            if args.out is not None:
                raise ConfigError("give --out or --resume, not both")
            store = SweepStore(args.resume)
            spec = store.load_spec()
            urls = {**spec.urls, **given}
            spec = SweepSpec(
                spec.points + tuple(n for n in given if n not in spec.points),
                spec.concurrencies,
                spec.repeats,
                spec.config,
                urls,
            )
        else:
            concs = parse_int_list("--concurrency", args.concurrency, 1, 10_000)
            config = workload_config(args, concurrency=concs[0])
            repeats = parse_int("--repeats", args.repeats, 1, 1000)
            spec = SweepSpec(tuple(given), concs, repeats, config, given)
            store = SweepStore(args.out or _default_folder())
        gpu = check_gpu(args.gpu, list(spec.urls.values()))
        interval = scrape_interval(args)
        try:
            provider = AttachProvider(spec.urls)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if args.resume is None:
            store.create(spec)
    except (ConfigError, PlotUnavailable, SweepError) as exc:
        return error(NAME, str(exc))
    return _sweep(args, spec, store, provider, gpu, baseline, interval)


def _default_folder() -> str:
    import datetime as dt

    return "specmon-sweep-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def _sweep(
    args: argparse.Namespace,
    spec: Any,
    store: Any,
    provider: Any,
    gpu: str,
    baseline: float | None,
    interval: float,
) -> int:
    import asyncio

    from rich.console import Console

    from specmon import __version__
    from specmon.bench.plot import PlotUnavailable, write_plot
    from specmon.bench.render import progress_for, sweep_renderable
    from specmon.bench.runner import run_bench
    from specmon.bench.sweep import run_sweep

    print(f"specmon sweep: saving to {store.folder}", file=sys.stderr)

    def one(endpoint: Any, config: Any, label: str) -> Any:
        display = progress_for(sys.stderr, label=label)
        with display:
            return asyncio.run(
                run_bench(
                    endpoint,
                    config,
                    api_key=args.api_key,
                    gpu=gpu,
                    progress=display,
                    scrape_interval=interval,
                )
            )

    outcome = run_sweep(
        spec,
        provider,
        store,
        run=one,
        baseline_tok_s=baseline,
        on_event=lambda s: print(f"specmon sweep: {s}", file=sys.stderr, flush=True),
        specmon_version=__version__,
    )
    width = None if sys.stdout.isatty() else 140
    Console(highlight=False, width=width).print(sweep_renderable(outcome.summary))
    if args.plot and outcome.summary.cells:
        try:
            write_plot(outcome.summary, args.plot)
        except (PlotUnavailable, OSError) as exc:
            print(f"specmon sweep: no plot: {exc}", file=sys.stderr)
    if outcome.interrupted:
        print(f"specmon sweep: interrupted; continue with --resume {store.folder}", file=sys.stderr)
        return 130
    return 0 if outcome.summary.cells else 1
