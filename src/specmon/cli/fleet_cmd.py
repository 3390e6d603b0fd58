"""`specmon fleet`: every vLLM target that a Prometheus scrapes, read through its HTTP API.

    specmon fleet http://prometheus:9090 [--match '{job="vllm"}'] [--once] [--json]

Reads the series of vLLM's Grafana dashboard (rates over `--rate-window`) and the dcgm-exporter
GPU series of each target's host, every `--interval` seconds (default 5), instead of attaching to
the servers (docs/fleet.md). Per-request acceptance is not available this way: the servers' own
pages are not read. `--once --json` prints one snapshot (docs/watch-json.md) and exits, `--once`
alone the servers table once; `--json` prints one snapshot line per interval until interrupted;
on a terminal the app's dashboard screen; otherwise plain lines. `--export [HOST:]PORT` serves
specmon's own /metrics on 127.0.0.1 unless a host is given. `specmon watch --prometheus URL` is
the same command under its old name.

Exit status: 0 after `--once`, when the app is quit (q, ctrl+q), or when the reader of `--json`
lines goes away; 1 after `--once` when the Prometheus did not answer; 130 when interrupted
(Ctrl-C: SIGINT, or the key in the app), 143 on SIGTERM and 129 on SIGHUP, after the sources are
stopped and the recording is closed; 2 for bad arguments or an --export port in use.

Defaults you set once: [baseline] tok_s and [app] theme in $XDG_CONFIG_HOME/specmon/config.toml
(or the file $SPECMON_CONFIG names); a flag beats the file (docs/app.md, "Configuration").
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.cli.args import (
    PlanError,
    add_command,
    http_url,
    scrape_interval,
    seconds_within,
)
from specmon.cli.export_args import add_export_argument
from specmon.cli.session_setup import (
    add_baseline_argument,
    add_redact_argument,
    add_theme_argument,
)
from specmon.ui.watch_output import FLEET_INTERVAL_S, FleetPlan

NAME = "fleet"
SUMMARY = "every vLLM target a Prometheus scrapes: tok/s, acceptance, GPU (docs/fleet.md)"
MAX_RATE_WINDOW_S = 24 * 3600.0
"""Longest --rate-window accepted: a day."""


def add_fleet_options(parser: Any, *, given: str = "") -> None:
    """The options that say how to read a Prometheus: `specmon fleet`'s, and `specmon watch`'s
    for `--prometheus` (`given`: the words that say so in their help)."""
    parser.add_argument(
        "--match",
        metavar="SELECTOR",
        default=None,
        help=f"{given}only targets whose labels match, e.g. '{{job=\"vllm\"}}'",
    )
    parser.add_argument(
        "--bearer-token-file",
        metavar="FILE",
        default=None,
        help=f"{given}send the token in FILE as `Authorization: Bearer` to that "
        "Prometheus only (the token is never on the command line nor in a recording)",
    )
    parser.add_argument(
        "--rate-window",
        type=seconds_within(0, MAX_RATE_WINDOW_S),
        default=60.0,
        metavar="SECONDS",
        help=f"{given}the PromQL rate() window (at least 4 scrape intervals of the "
        "Prometheus; default 60)",
    )


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument(
        "url",
        type=http_url,
        metavar="URL",
        help="the Prometheus, e.g. http://prometheus:9090",
    )
    add_fleet_options(p)
    p.add_argument(
        "--interval",
        type=scrape_interval,
        default=FLEET_INTERVAL_S,
        help=f"seconds between reads of the Prometheus (default {FLEET_INTERVAL_S:g})",
    )
    add_baseline_argument(p)
    add_theme_argument(p)
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    add_redact_argument(p)
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="JSON output (one line per snapshot)")
    add_export_argument(p)


def fleet_plan(args: argparse.Namespace, url: str, *, command: str) -> FleetPlan:
    """The fleet the arguments ask for; PlanError (one line) for a bad selector or a token file
    that cannot be used (checked now, before anything starts)."""
    from specmon.core.promql import MatchError, parse_match

    try:
        parse_match(args.match)
    except MatchError as exc:
        raise PlanError(str(exc)) from None
    if args.bearer_token_file is not None:
        from specmon.runtime.fleet_run import BearerTokenFileError, read_bearer_token_file

        try:
            read_bearer_token_file(args.bearer_token_file)
        except BearerTokenFileError as exc:
            raise PlanError(str(exc)) from None
    return FleetPlan(
        command,
        url,  # stripped and checked by its argument type
        match=args.match,
        bearer_token_file=args.bearer_token_file,
        rate_window_s=args.rate_window,
        interval=args.interval if args.interval is not None else FLEET_INTERVAL_S,
        baseline=args.baseline,
        theme=args.theme,
        record=args.record,
        redact=tuple(args.redact),
        once=args.once,
        json=args.json,
        export=args.export,
    )


def plan_from(args: argparse.Namespace) -> FleetPlan:
    return fleet_plan(args, args.url, command=NAME)


def run(plan: FleetPlan) -> int:
    from specmon.ui.watch_output import run_fleet

    return run_fleet(plan)
