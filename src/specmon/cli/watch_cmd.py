"""`specmon watch`: attach to one or more running vLLM servers and show what they do.

`--once --json` prints one snapshot (docs/watch-json.md) and exits, `--once` alone the app's
servers table once (one row per server, in the order given, fitted to the terminal's width) and
each server's latency in ms; `--json` prints one snapshot line per interval until interrupted;
on a terminal the app's dashboard screen: one row per server (and per engine), the selected one
in detail (keys: up/down select, a adds a server, x removes the selected one, r records, m adds
a marker, F4 lists the answers, q quits); otherwise plain lines. Servers that are down are shown
as down with their last error; the others keep updating. For https servers whose certificate
comes from a private CA, point SSL_CERT_FILE (or SSL_CERT_DIR) at the CA.

`--prometheus URL [--match SELECTOR]` reads every vLLM target that a Prometheus scrapes, through
its HTTP API, instead of attaching to servers (docs/fleet.md). `--export [HOST:]PORT` serves
specmon's own /metrics (per-request AL, vanilla-speed flags by reason, the degradation cycle) on
127.0.0.1 unless a host is given.

Exit status: 0 after `--once`, when the app is quit (q, ctrl+q), or when the reader of `--json`
lines goes away (a closed pipe, as with `| head`); 130 when interrupted (Ctrl-C: SIGINT, or the
key in the app), 143 on SIGTERM and 129 on SIGHUP, after the sources are stopped and the
recording is closed (within 2 s; a second Ctrl-C exits at once); 2 for bad arguments or an
--export port in use; 1 after `--once` when none of the servers given could be read (each is
still in the snapshot, with its state and why), or after `--once --prometheus` when the
Prometheus did not answer. Every read of a server has a deadline for its whole answer
(5 s for /metrics, 10 s for /version and /v1/models): a server that never answers or trickles
its page is shown down with why, never waited on.

Defaults you set once: [watch] attach, interval and canary, [baseline] tok_s and [app] theme in
$XDG_CONFIG_HOME/specmon/config.toml (or the file $SPECMON_CONFIG names); a flag beats the file,
`specmon config` shows what applies (docs/app.md, "Configuration").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from specmon.cli.args import (
    add_api_key_argument,
    add_command,
    add_gpu_argument,
    fail,
    http_url,
    scrape_interval,
    seconds_within,
    server_url,
)
from specmon.cli.export_args import add_export_argument, start_exporter
from specmon.cli.session_setup import (
    add_baseline_argument,
    add_redact_argument,
    add_theme_argument,
    default_gpu_source,
    gpu_sampler,
)
from specmon.core.canary import DEFAULT_INTERVAL_S
from specmon.core.watch_json import snapshot_of

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx
    from specmon.core.views import SessionView
    from specmon.runtime.fleet_run import FleetSpec
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sources.prometheus_fleet import PrometheusFleet

FLEET_INTERVAL_S = 5.0
"""Default seconds between reads of a Prometheus (its own scrape interval is usually 15 s)."""
DEFAULT_CANARY_S = DEFAULT_INTERVAL_S
"""`--canary` without a value."""
MIN_CANARY_S = 10.0
MAX_CANARY_S = 86_400.0
MAX_RATE_WINDOW_S = 24 * 3600.0
"""Longest --rate-window accepted: a day."""

NAME = "watch"
NO_SERVERS = (
    "give --attach URL or --prometheus URL (or set [watch] attach in the config file: "
    "`specmon config`)"
)
"""Why a watch cannot start with neither flag given and no servers in the config file."""
SUMMARY = "attach to running vLLM servers: live tok/s, acceptance, GPU, flags"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    where = p.add_mutually_exclusive_group()  # one of them, or [watch] attach of the config
    where.add_argument(
        "--attach",
        action="append",
        type=server_url,
        metavar="URL",
        help="server base URL, e.g. http://gpu-box:8000 (repeat for several servers; default: "
        "[watch] attach of the config file)",
    )
    where.add_argument(
        "--prometheus",
        metavar="URL",
        type=http_url,
        help="read every vLLM target that this Prometheus scrapes, through its HTTP API "
        "(docs/fleet.md), e.g. http://prometheus:9090",
    )
    p.add_argument(
        "--match",
        metavar="SELECTOR",
        default=None,
        help="with --prometheus: only targets whose labels match, e.g. '{job=\"vllm\"}'",
    )
    p.add_argument(
        "--bearer-token-file",
        metavar="FILE",
        default=None,
        help="with --prometheus: send the token in FILE as `Authorization: Bearer` to that "
        "Prometheus only (the token is never on the command line nor in a recording)",
    )
    p.add_argument(
        "--rate-window",
        type=seconds_within(0, MAX_RATE_WINDOW_S),
        default=60.0,
        metavar="SECONDS",
        help="with --prometheus: the PromQL rate() window (at least 4 scrape intervals of the "
        "Prometheus; default 60)",
    )
    p.add_argument(
        "--metrics-url",
        action="append",
        default=[],
        type=server_url,
        metavar="URL",
        help="where a server's /metrics page is when not at URL/metrics (paired with --attach "
        "in order)",
    )
    add_api_key_argument(p)
    add_gpu_argument(p, "local when every attached server runs on this machine, else none")
    add_baseline_argument(p)
    p.add_argument(
        "--interval",
        type=scrape_interval,
        default=None,
        help="seconds between scrapes (default: [watch] interval of the config file, else 1; "
        "with --prometheus, between reads: default 5)",
    )
    add_theme_argument(p)
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    add_redact_argument(p)
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="JSON output (one line per snapshot)")
    add_export_argument(p)
    p.add_argument(
        "--canary",
        nargs="?",
        type=float,
        const=DEFAULT_CANARY_S,
        default=None,
        metavar="SECONDS",
        help="probe each server with one fixed greedy request at most every SECONDS (default "
        f"{DEFAULT_CANARY_S:g}) while it has live traffic, and flag engine drift (docs/canary.md; "
        "[watch] canary of the config file sets it for every watch of servers)",
    )
    p.add_argument(
        "--canary-relearn",
        action="store_true",
        help="with --canary: learn each server's canary baseline again from this session's "
        "probes (after a new model revision or driver; the stored one is replaced once learned)",
    )


def _canary_problem(args: argparse.Namespace) -> str | None:
    """Why --canary cannot be used with these arguments (None: it can)."""
    if not MIN_CANARY_S <= args.canary <= MAX_CANARY_S:  # NaN fails too
        return (
            f"--canary must be a number of seconds from {MIN_CANARY_S:g} to {MAX_CANARY_S:g}, "
            f"got {args.canary}"
        )
    if args.prometheus is not None:
        return "--canary goes with --attach (it sends requests to the servers themselves)"
    if args.once:
        return "--canary needs a running watch, not --once"
    return None


def run(args: argparse.Namespace) -> int:
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.monitor import Monitor, pair_targets

    if args.attach is None and args.prometheus is None:
        return fail(NAME, NO_SERVERS)
    interval = args.interval
    if interval is None:
        interval = FLEET_INTERVAL_S if args.prometheus is not None else 1.0
    if args.match is not None and args.prometheus is None:
        return fail(NAME, "--match goes with --prometheus")
    if args.bearer_token_file is not None and not args.prometheus:
        return fail(NAME, "--bearer-token-file goes with --prometheus")
    export = args.export
    if args.canary is not None:
        problem = _canary_problem(args)
        if problem is not None:
            return fail(NAME, problem)
    elif getattr(args, "canary_relearn", False):
        return fail(NAME, "--canary-relearn goes with --canary")
    if args.prometheus is not None:
        return _fleet(args, export, interval)
    gpu = args.gpu if args.gpu is not None else default_gpu_source(args.attach)
    try:
        targets = pair_targets(args.attach, args.metrics_url)
    except ValueError as exc:
        return fail(NAME, str(exc))
    from specmon.cli.app_runner import wants_app  # a terminal, or a browser (specmon web)

    if not args.json and not args.once and wants_app():
        return _app(
            targets,
            gpu,
            args,
            export,
            interval,
            canary_s=args.canary,
            canary_relearn=args.canary is not None and bool(args.canary_relearn),
        )
    try:
        monitor = Monitor(
            targets,
            state_factory(args.baseline),
            api_key=args.api_key,
            gpu=gpu_sampler(gpu),
            interval=interval,
            record=args.record,
            redact=tuple(args.redact),
        )
    except ValueError as exc:
        return fail(NAME, str(exc))
    return _run_monitor(monitor, args, export, fleet_spec=None)


def _run_monitor(
    monitor: Monitor,
    args: argparse.Namespace,
    export: tuple[str, int] | None,
    fleet_spec: FleetSpec | None,
) -> int:
    from specmon.core.errors import RecordingError
    from specmon.runtime.exporter import Exporter, ExporterError

    exporter: Exporter | None = None
    try:
        if export is not None:
            try:
                exporter = start_exporter(export, monitor.view, "watch")
            except ExporterError as exc:
                return fail(NAME, str(exc))
        try:
            monitor.start(run_loops=not args.once)
        except RecordingError as exc:
            return fail(NAME, str(exc))
        if getattr(args, "canary", None) is not None and not args.once:
            from specmon.runtime.canary import start_canaries

            start_canaries(monitor, args.canary, relearn=bool(getattr(args, "canary_relearn", 0)))
        if fleet_spec is not None:
            from specmon.runtime.fleet_run import start_fleet

            fleet = start_fleet(monitor, fleet_spec, run_loops=not args.once)
            if args.once:
                return _fleet_once(monitor, fleet, as_json=args.json)
        if args.once:
            return _once(monitor, as_json=args.json)
        if args.json:
            return _json_lines(monitor)
        return _live(monitor, title=f"Prometheus {fleet_spec.url}" if fleet_spec else None)
    except KeyboardInterrupt:
        return 130
    finally:
        monitor.stop()
        if exporter is not None:
            exporter.stop()


def _fleet(args: argparse.Namespace, export: tuple[str, int] | None, interval: float) -> int:
    """`--prometheus URL`: the session's servers are the vLLM targets that Prometheus scrapes."""
    from specmon.core.promql import MatchError, parse_match
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.fleet_run import FleetSpec
    from specmon.runtime.monitor import Monitor

    url = args.prometheus  # stripped and checked by its argument type
    try:
        parse_match(args.match)
    except MatchError as exc:
        return fail(NAME, str(exc))
    if args.metrics_url:
        return fail(NAME, "--metrics-url goes with --attach")
    if args.gpu is not None:
        return fail(
            NAME,
            "--gpu goes with --attach (with --prometheus, GPUs come from the dcgm-exporter "
            "series in the Prometheus)",
        )
    if args.bearer_token_file is not None:
        from specmon.runtime.fleet_run import BearerTokenFileError, read_bearer_token_file

        try:
            read_bearer_token_file(args.bearer_token_file)  # checked now: one line, exit 2
        except BearerTokenFileError as exc:
            return fail(NAME, str(exc))
    spec = FleetSpec(
        url,
        args.match,
        interval,
        args.rate_window,
        bearer_token_file=args.bearer_token_file,
    )
    from specmon.cli.app_runner import wants_app  # a terminal, or a browser (specmon web)

    if not args.json and not args.once and wants_app():
        return _app([], "none", args, export, interval, fleet=spec)
    monitor = Monitor(
        [],
        state_factory(args.baseline),
        interval=interval,
        record=args.record,
        redact=tuple(args.redact),
    )
    return _run_monitor(monitor, args, export, fleet_spec=spec)


def _print_snapshot(view: SessionView, *, as_json: bool, title: str) -> None:
    """One snapshot: a line of JSON (`--json`), else the app's servers table printed once, at
    the terminal's width (COLUMNS when set)."""
    if as_json:
        print(dumps(snapshot_of(view)))
        return
    from rich.console import Console

    from specmon.ui.live_console import once_text

    console = Console(highlight=False)
    console.print(once_text(view, title=title, width=console.width))


def in_given_order(view: SessionView, bases: Sequence[str]) -> SessionView:
    """The view with its servers in the order the command line gave them (the view holds them
    in the order they were first heard from); any other server after them, as it was."""
    rank = {base: n for n, base in enumerate(bases)}
    ordered = sorted(view.servers, key=lambda s: rank.get(s.source, len(rank)))
    return replace(view, servers=tuple(ordered))


def _fleet_once(monitor: Monitor, fleet: PrometheusFleet, *, as_json: bool) -> int:
    """One read of the Prometheus (its rates need no second read), then one snapshot. Exit 1
    when the Prometheus did not answer (the snapshot says why in its markers)."""
    event = monitor.hub.submit(fleet.read_once(monitor.hub.emit)).result(120)
    view = monitor.view(fresh=True)
    _print_snapshot(view, as_json=as_json, title=f"specmon watch — Prometheus {fleet.source}")
    if event.error is not None:
        return fail(NAME, str(event.error), 1)
    return 0


def _app(
    targets: list[Target],
    gpu: str,
    args: argparse.Namespace,
    export: tuple[str, int] | None,
    interval: float,
    *,
    canary_s: float | None = None,
    canary_relearn: bool = False,
    fleet: FleetSpec | None = None,
) -> int:
    """On a terminal: the app's dashboard screen (the chat's side panel, full-width), with the
    collector in its own process."""
    from specmon.cli.app_runner import Dashboard, run_dashboard
    from specmon.runtime.session import SessionConfig

    config = SessionConfig(
        tuple(targets),
        api_key=args.api_key,
        gpu=gpu,
        interval=interval,
        record=args.record,
        redact=tuple(args.redact),
        quiet=True,
        canary_s=canary_s,
        canary_relearn=canary_relearn,
        fleet=fleet,
        baseline_tok_s=args.baseline,
    )
    return run_dashboard(lambda: config, Dashboard(NAME, "watch", theme=args.theme, export=export))


def _once(monitor: Monitor, *, as_json: bool) -> int:
    """Two scrapes one interval apart (so windowed rates exist), then one snapshot. Every given
    server is in it, with its state and why; exit 1 when none of them could be read."""
    from specmon.core.events import ServerStatusChanged
    from specmon.ui.formatting import clean

    for round_ in range(2):
        if round_:
            threading.Event().wait(monitor.interval)
        try:
            monitor.scrape_all_once()
        except TimeoutError:  # each read has its own deadline; this is only a last resort
            break
    for target, scraper in zip(monitor.targets, monitor.scrapers, strict=False):
        if scraper.status is None:  # nothing heard at all: still listed, and why
            monitor.hub.emit(  # under the hub's lock, so the view below has it
                ServerStatusChanged(
                    t=monitor.hub.clock(),
                    source=target.base,
                    status="down",
                    detail=f"no answer from {target.metrics} within {scraper.deadline_s:g} s",
                )
            )
    view = in_given_order(monitor.view(fresh=True), [t.base for t in monitor.targets])
    title = "specmon watch — " + ", ".join(t.base for t in monitor.targets)
    _print_snapshot(view, as_json=as_json, title=title)
    given = {t.base for t in monitor.targets}
    servers = [s for s in view.servers if s.source in given]
    if given and not any(s.status == "up" for s in servers):
        why = "; ".join(f"{s.source}: {s.status} ({s.status_detail})" for s in servers)
        return fail(NAME, f"no server could be read: {clean(why)}", 1)
    return 0


def dumps(snapshot: dict[str, Any]) -> str:
    """One snapshot as one line of strict JSON: a number that is not finite (none should reach
    here: the views hold None for them) is written null, never NaN or Infinity."""
    try:
        return json.dumps(snapshot, allow_nan=False)
    except ValueError:
        from specmon.core.safe_json import finite

        return json.dumps(finite(snapshot), allow_nan=False)


def _json_lines(monitor: Monitor) -> int:
    """One snapshot line per interval until interrupted (130) or the reader goes away (0)."""
    stop = threading.Event()
    try:
        while not stop.wait(monitor.interval):
            print(dumps(snapshot_of(monitor.view())), flush=True)
    except BrokenPipeError:
        # The reader closed the pipe: stop quietly. Point stdout at devnull so the interpreter's
        # final flush does not fail again (Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def _live(monitor: Monitor, title: str | None = None) -> int:
    from specmon.cli.app_runner import show_console

    servers = title or ", ".join(t.base for t in monitor.targets)
    show_console(monitor, title=f"specmon watch — {servers}", done=threading.Event())
    return 0
