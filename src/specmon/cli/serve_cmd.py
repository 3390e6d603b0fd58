"""`specmon serve`: start a vLLM server with speculative decoding and watch it live.

Builds `vllm serve` with a valid --speculative-config (dflash by default when --draft is given),
checks before launch (vLLM present, port free, GPU memory against the preset, the arguments
through vLLM's own parser), starts it in its own process group with its log in a file, shows the
startup progress until /health answers 200, then the live dashboard until Ctrl-C. On a terminal
both are the Textual app (its startup view with the server's log, then the dashboard; `l` shows the
log); otherwise progress lines on stderr and the plain dashboard on stdout. On Ctrl-C,
SIGTERM, SIGHUP or a crash the whole group is stopped (TERM, then KILL after a grace period); if
specmon itself is killed, a watchdog process stops it.

Exit status: 0 after --dry-run or when the app is quit (q, ctrl+q); 130 after Ctrl-C (SIGINT, or
the key in the app), 143 after SIGTERM, 129 after SIGHUP (the server stopped);
1 when the server failed to start or died (its last 50 log lines and the likely cause are
printed); 2 for bad arguments or a failed pre-launch check.
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.cli.args import add_command, api_key_of, scrape_interval
from specmon.cli.export_args import add_export_argument
from specmon.cli.host_args import add_host_arguments
from specmon.cli.session_setup import add_baseline_argument, add_theme_argument
from specmon.runtime.host_plan import HostFlags
from specmon.ui.serve_run import ServePlan

NAME = "serve"
SUMMARY = (
    "start vLLM with speculative decoding (DFlash, EAGLE-3, MTP, ngram, draft model) and watch it"
)


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    add_host_arguments(p)
    add_theme_argument(p)
    add_export_argument(p)
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    p.add_argument(
        "--gpu",
        choices=("local", "none"),
        default="local",
        help="GPU numbers from local NVML (default) or none",
    )
    p.add_argument(
        "--interval",
        type=scrape_interval,
        default=1.0,
        help="seconds between /metrics scrapes",
    )
    add_baseline_argument(p)


def plan_from(args: argparse.Namespace) -> ServePlan:
    return ServePlan(
        HostFlags.of(args),
        theme=args.theme,
        export=args.export,
        record=args.record,
        gpu=args.gpu,
        interval=args.interval,
        baseline=args.baseline,
        api_key=api_key_of(args),
    )


def run(plan: ServePlan) -> int:
    from specmon.ui.serve_run import run_serve

    return run_serve(plan)
