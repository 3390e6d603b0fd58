"""The `specmon` command line: parses arguments and hands each subcommand to its module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from specmon import __version__

# Each subcommand lives in its own module under specmon.cli, exposing
#   register(subparsers) -> None   and   run(args) -> int
SUBCOMMANDS: tuple[str, ...] = ("sim", "watch", "demo", "serve", "presets")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specmon",
        description=(
            "Watch what speculative decoding is doing on a vLLM server: tok/s, acceptance "
            "length, per-position acceptance, GPU state, and requests that fall to vanilla speed."
        ),
    )
    parser.add_argument("-V", "--version", action="version", version=f"specmon {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"specmon.cli.{name}_cmd")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    module = importlib.import_module(f"specmon.cli.{args.command}_cmd")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
