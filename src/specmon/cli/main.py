"""The `specmon` command line: parses arguments and hands each subcommand to its module.

Registering a subcommand must stay cheap (`specmon --help` imports every `*_cmd` module): a
command module imports heavy libraries (openai, httpx, rich, textual, prometheus_client, pynvml)
and the runtime inside its `run`, never at module level. `tests/unit/test_cli_lazy_imports.py`
checks this.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from specmon import __version__
from specmon.cli.args import OneLineErrorParser, PlanError, fail
from specmon.cli.user_config import ConfigError, applies_to, apply_user_config, load_user_config

# Each subcommand lives in its own module under specmon.cli, exposing
#   register(subparsers) -> None,  plan_from(args) -> a frozen plan  and  run(plan) -> int:
# the command is run(plan_from(args)); nothing after plan_from reads the parsed arguments, and
# a PlanError from it is one line on stderr, exit 2.
SUBCOMMANDS: tuple[str, ...] = (
    "chat",
    "demo",
    "watch",
    "fleet",
    "serve",
    "replay",
    "bench",
    "sweep",
    "compare",
    "card",
    "presets",
    "sim",
    "web",
    "config",
    "completion",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="specmon",
        description=(
            "Watch what speculative decoding is doing on a vLLM server: tok/s, acceptance "
            "length, per-position acceptance, GPU state, and requests that fall to vanilla speed."
        ),
        epilog="Ctrl-C, SIGTERM or SIGHUP stops any command cleanly within 2 s (bench and "
        "sweep: within 10 s, writing what they measured), with exit status 130 after Ctrl-C "
        "(SIGINT, or the key in the app), 143 after SIGTERM and 129 after SIGHUP; sim, a "
        "server, exits 0; a second Ctrl-C exits at once. Quitting the app (q, ctrl+q) exits 0.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"specmon {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"specmon.cli.{name}_cmd")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. With `argv` None (the `specmon` script, `python -m specmon`) this is the
    whole process: SIGINT, SIGTERM and SIGHUP get the bounded-shutdown handlers of
    runtime.shutdown.
    Called with a list (tests, embedding) it leaves the caller's signal handlers alone."""
    shutdown = None
    if argv is None:
        from specmon.runtime import shutdown as shutdown_module

        shutdown = shutdown_module.install()
    if argv is None and "SPECMON_ARGV_SECRETS" in os.environ:  # an app of `specmon web`
        from specmon.web.plan import restore_argv_secrets

        argv = restore_argv_secrets(sys.argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    module = importlib.import_module(f"specmon.cli.{args.command}_cmd")
    if applies_to(args.command):  # the user's defaults (config.toml); flags beat them
        try:
            apply_user_config(args, load_user_config())
        except ConfigError as exc:
            print(f"specmon {args.command}: {exc}", file=sys.stderr)
            return 2
    try:
        try:
            plan = module.plan_from(args)
        except PlanError as exc:
            return fail(args.command, str(exc))
        code = int(module.run(plan))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    if shutdown is not None and shutdown.exit_code is not None:
        if code == 130:  # an interrupted command says 130; after SIGTERM 143, after SIGHUP 129
            code = shutdown.exit_code
        # The command has stopped cleanly (sources stopped, recording closed). Tearing the
        # interpreter down (joining threads, freeing openai/pydantic modules) takes 0.2-0.4 s
        # idle and seconds under load: after a stop signal the process skips it.
        shutdown.exit_now(code)
    return code
