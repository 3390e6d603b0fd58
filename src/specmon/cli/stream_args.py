"""The stream-limit options of the commands that stream answers (chat, demo, bench, sweep):
`--idle-timeout`, `--max-answer-bytes`, `--max-answer-tokens` (core.stream_limits)."""

from __future__ import annotations

import argparse

from specmon.cli.args import byte_count, positive_int, positive_seconds
from specmon.core.stream_limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_TOKENS,
    StreamLimits,
)


def add_stream_args(
    p: argparse.ArgumentParser, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
) -> None:
    """Add the stream-limit options to a command's parser (`idle_timeout_s`: the default)."""
    p.add_argument(
        "--idle-timeout",
        type=positive_seconds,
        default=idle_timeout_s,
        metavar="S",
        help="give up on an answer after S seconds without a byte from the server "
        f"(default {idle_timeout_s:g})",
    )
    p.add_argument(
        "--max-answer-bytes",
        type=byte_count,
        default=DEFAULT_MAX_ANSWER_BYTES,
        metavar="N",
        help="end an answer whose text passes N bytes, e.g. 512KiB (default 4MiB)",
    )
    p.add_argument(
        "--max-answer-tokens",
        type=positive_int,
        default=DEFAULT_MAX_ANSWER_TOKENS,
        metavar="N",
        help="end an answer past N tokens when its request sets no max_tokens "
        f"(default {DEFAULT_MAX_ANSWER_TOKENS})",
    )


def stream_limits_from(args: argparse.Namespace) -> StreamLimits:
    """The limits the options give (defaults where a parser lacks them)."""
    return StreamLimits(
        idle_timeout_s=getattr(args, "idle_timeout", DEFAULT_IDLE_TIMEOUT_S),
        max_answer_bytes=getattr(args, "max_answer_bytes", DEFAULT_MAX_ANSWER_BYTES),
        max_answer_tokens=getattr(args, "max_answer_tokens", DEFAULT_MAX_ANSWER_TOKENS),
    )
