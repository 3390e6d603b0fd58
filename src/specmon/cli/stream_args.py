"""The stream-limit options of the commands that stream answers (chat, demo, bench, sweep):
`--idle-timeout`, `--max-answer-bytes`, `--max-answer-tokens` (core.stream_limits)."""

from __future__ import annotations

import argparse
import math

from specmon.core.stream_limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_TOKENS,
    StreamLimits,
)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20}


def _bytes(text: str) -> int:
    """A byte count: `4194304`, `512KiB`, `4MiB` (also `k`, `m`)."""
    raw = text.strip().lower()
    digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = raw[len(digits) :].strip()
    if unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"expected bytes (e.g. 4194304, 512KiB, 4MiB), got {text!r}"
        )
    try:
        value = int(digits) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected bytes (e.g. 4194304, 512KiB, 4MiB), got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_stream_args(
    p: argparse.ArgumentParser, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
) -> None:
    """Add the stream-limit options to a command's parser (`idle_timeout_s`: the default)."""
    p.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=idle_timeout_s,
        metavar="S",
        help="give up on an answer after S seconds without a byte from the server "
        f"(default {idle_timeout_s:g})",
    )
    p.add_argument(
        "--max-answer-bytes",
        type=_bytes,
        default=DEFAULT_MAX_ANSWER_BYTES,
        metavar="N",
        help="end an answer whose text passes N bytes, e.g. 512KiB (default 4MiB)",
    )
    p.add_argument(
        "--max-answer-tokens",
        type=_count,
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
