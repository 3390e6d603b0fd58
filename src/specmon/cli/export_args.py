"""`--export [HOST:]PORT`: specmon's own /metrics page (runtime/exporter.py), the same flag and
the same start for every command that has a live session (watch, demo, chat, serve:
`runtime.exporter.start_exporter`)."""

from __future__ import annotations

import argparse


def add_export_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--export",
        type=export_address,
        metavar="[HOST:]PORT",
        nargs="?",
        const=":9464",
        default=None,
        help="serve specmon's own /metrics (per-request AL and decode tok/s histograms, "
        "vanilla-speed flags by reason, the degradation cycle) on HOST:PORT; 127.0.0.1 "
        "unless a host is given; port 9464 when none is",
    )


def export_address(text: str) -> tuple[str, int]:
    """argparse type of `--export`: `[HOST:]PORT` as (host, port), 127.0.0.1 when no host is
    given (runtime.exporter.parse_listen; prometheus_client is imported only when it is)."""
    from specmon.runtime.exporter import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
