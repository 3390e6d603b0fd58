"""`specmon watch`: attach to one or more running vLLM servers and show what they do.

`--once --json` prints one snapshot (docs/watch-json.md) and exits, `--once` alone the app's
servers table once (one row per server, in the order given, fitted to the terminal's width) and
each server's latency in ms; `--json` prints one snapshot line per interval until interrupted;
on a terminal the app's dashboard screen: one row per server (and per engine), the selected one
in detail (keys: up/down select, a adds a server, x removes the selected one, r records, m adds
a marker, F4 lists the answers, q quits); otherwise plain lines. Servers that are down are shown
as down with their last error; the others keep updating. For https servers whose certificate
comes from a private CA, point SSL_CERT_FILE (or SSL_CERT_DIR) at the CA.

`--prometheus URL` is the old spelling of `specmon fleet URL` (every vLLM target that a
Prometheus scrapes, docs/fleet.md): it says so in one line on stderr, then runs it.
`--export [HOST:]PORT` serves specmon's own /metrics (per-request AL, vanilla-speed flags by
reason, the degradation cycle) on 127.0.0.1 unless a host is given.

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
import sys
from typing import Any

from specmon.cli.args import (
    PlanError,
    add_api_key_argument,
    add_command,
    add_gpu_argument,
    api_key_of,
    http_url,
    scrape_interval,
    server_url,
)
from specmon.cli.export_args import add_export_argument
from specmon.cli.fleet_cmd import add_fleet_options
from specmon.cli.session_setup import (
    add_baseline_argument,
    add_redact_argument,
    add_theme_argument,
    gpu_choice,
)
from specmon.core.canary import DEFAULT_INTERVAL_S as DEFAULT_CANARY_S  # --canary alone
from specmon.core.canary import MAX_INTERVAL_S as MAX_CANARY_S
from specmon.core.canary import MIN_INTERVAL_S as MIN_CANARY_S
from specmon.ui.watch_output import FleetPlan, WatchPlan

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
        help="the old spelling of `specmon fleet URL`: every vLLM target that this Prometheus "
        "scrapes (docs/fleet.md)",
    )
    add_fleet_options(p, given="with --prometheus: ")
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


def plan_from(args: argparse.Namespace) -> WatchPlan | FleetPlan:
    """The watch the arguments ask for (a FleetPlan for `--prometheus`, `specmon fleet`'s old
    spelling); PlanError (one line, exit 2) for arguments that do not go together."""
    from specmon.runtime.monitor import pair_targets

    if args.attach is None and args.prometheus is None:
        raise PlanError(NO_SERVERS)
    if args.match is not None and args.prometheus is None:
        raise PlanError("--match goes with --prometheus")
    if args.bearer_token_file is not None and not args.prometheus:
        raise PlanError("--bearer-token-file goes with --prometheus")
    if args.canary is not None:
        problem = _canary_problem(args)
        if problem is not None:
            raise PlanError(problem)
    elif args.canary_relearn:
        raise PlanError("--canary-relearn goes with --canary")
    if args.prometheus is not None:
        if args.metrics_url:
            raise PlanError("--metrics-url goes with --attach")
        if args.gpu is not None:
            raise PlanError(
                "--gpu goes with --attach (with --prometheus, GPUs come from the dcgm-exporter "
                "series in the Prometheus)"
            )
        from specmon.cli.fleet_cmd import fleet_plan

        return fleet_plan(args, args.prometheus, command=NAME)
    try:
        targets = pair_targets(args.attach, args.metrics_url)
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    return WatchPlan(
        tuple(targets),
        api_key=api_key_of(args),
        gpu=gpu_choice(args.gpu, args.attach),
        baseline=args.baseline,
        interval=args.interval if args.interval is not None else 1.0,
        theme=args.theme,
        record=args.record,
        redact=tuple(args.redact),
        once=args.once,
        json=args.json,
        export=args.export,
        canary_s=args.canary,
        canary_relearn=args.canary is not None and bool(args.canary_relearn),
    )


ALIAS_NOTE = "specmon watch: --prometheus URL is `specmon fleet URL` now (the same options)"
"""What `watch --prometheus` says before it runs the fleet (one line on stderr)."""


def run(plan: WatchPlan | FleetPlan) -> int:
    if not isinstance(plan, WatchPlan):
        from specmon.cli import fleet_cmd

        print(ALIAS_NOTE, file=sys.stderr, flush=True)
        return fleet_cmd.run(plan)
    from specmon.ui.watch_output import run_watch

    return run_watch(plan)
