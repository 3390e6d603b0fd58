"""The command line's shared pieces: the parser class, `add_command`, `fail`, and the argument
types every command uses.

An argument type is an argparse `type=` callable: it turns the text into the value or raises
ArgumentTypeError with one line naming what was wrong, so a bad value is refused while parsing
(`specmon CMD: error: argument --flag: ...`, exit 2) and `run()` gets checked values. Nothing
heavy is imported here: `specmon --help` registers every command through this module.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from specmon.core.scrape_interval import MAX_INTERVAL_S, MIN_INTERVAL_S
from specmon.runtime.one_line import fail as fail  # the one wording; cli's name for it

ArgType = Callable[[str], Any]


class OneLineErrorParser(argparse.ArgumentParser):
    """Bad arguments are one line naming what was wrong, then where the help is (argparse's own
    error() prints the whole usage first, which on most commands is a screenful); exit 2.

    Options are taken only as written in full (`allow_abbrev` False, for every parser of this
    class, subcommands included): `--api-ke KEY` is an unknown option, not `--api-key`, so a
    secret cannot slip past code that looks for the option by its name (`specmon web` keeps
    `--api-key` off its app processes' command lines), and a new option never changes what an
    abbreviation on someone's command line meant."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")


def add_command(subparsers: Any, name: str, summary: str, doc: str | None, **kwargs: Any) -> Any:
    """A subcommand's parser: `summary` in `specmon --help`, the module's docstring `doc` as the
    description, laid out as written."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )


class PlanError(ValueError):
    """Arguments that parse but do not go together (a command's `plan_from`): `main` says
    `specmon COMMAND: MESSAGE` (one line) and exits 2."""


def _number(text: str, kind: type[float] | type[int] = float) -> Any:
    try:
        return kind(text)
    except ValueError:
        what = "a number" if kind is float else "a whole number"
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number above 0 (a baseline tok/s, a pace multiplier)."""
    value = float(_number(text))
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def pace(text: str) -> float:
    """A pace multiplier above 0; `inf` for no pacing at all (the simulator's meaning)."""
    value = float(_number(text))
    if not value > 0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be above 0 (inf: no pacing), got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0 (a timeout)."""
    value = float(_number(text))
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def seconds_within(lo: float, hi: float) -> ArgType:
    """A number of seconds from `lo` to `hi` (`lo` 0: above 0)."""

    def seconds(text: str) -> float:
        value = float(_number(text))
        if not (lo < value if lo == 0 else lo <= value) or not value <= hi:
            low = "above 0 and at most" if lo == 0 else f"from {lo:g} to"
            raise argparse.ArgumentTypeError(
                f"must be a number of seconds {low} {hi:g}, got {text!r}"
            )
        return value

    return seconds


scrape_interval = seconds_within(MIN_INTERVAL_S, MAX_INTERVAL_S)
"""`--interval` of watch and serve: seconds between scrapes."""


def positive_int(text: str) -> int:
    """A whole number, at least 1 (a count of requests or tokens)."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (0: a free one is picked)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535 (0 picks a free one), got {value}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (an environment variable, a config key) as (name, value)."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20}


def byte_count(text: str) -> int:
    """A byte count: `4194304`, `512KiB`, `4MiB` (also `k`, `m`); at least 1."""
    raw = text.strip().lower()
    digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = raw[len(digits) :].strip()
    try:
        value = int(digits) * _BYTE_UNITS[unit]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(
            f"expected bytes (e.g. 4194304, 512KiB, 4MiB), got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


MAX_TEMPERATURE = 100.0
"""The highest sampling temperature accepted (as bench's --temperature)."""


def temperature(text: str) -> float:
    """A sampling temperature, 0 to MAX_TEMPERATURE."""
    value = float(_number(text))
    if not 0.0 <= value <= MAX_TEMPERATURE:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_TEMPERATURE:g}, got {text!r}")
    return value


def top_p(text: str) -> float:
    """A nucleus-sampling probability, above 0 and at most 1."""
    value = float(_number(text))
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text!r}")
    return value


def http_url(text: str) -> str:
    """An http(s) URL with something after the scheme (a Prometheus), stripped."""
    url = text.strip()
    if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
        raise argparse.ArgumentTypeError(f"must be an http(s) URL, got {text!r}")
    return url


def server_url(text: str) -> str:
    """A server's address (`http://host:8000`, or `host:8000`): checked the way the session
    reads it (sources.server_identity.server_base: scheme, host, port), kept as given."""
    from specmon.sources.server_identity import server_base

    try:
        server_base(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


GPU_CHOICES = ("local", "none")


def gpu_source(text: str) -> str:
    """`--gpu`: local (NVML), none, or a dcgm-exporter http(s) URL."""
    if text not in GPU_CHOICES and not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"must be local, none or a dcgm-exporter http(s) URL, got {text!r}"
        )
    return text


def add_gpu_argument(parser: Any, default_help: str) -> None:
    """`--gpu local|none|DCGM_URL` (default None: the command picks from where its servers
    are; `default_help` says how)."""
    parser.add_argument(
        "--gpu",
        type=gpu_source,
        default=None,
        metavar="local|none|DCGM_URL",
        help=f"GPU numbers from local NVML, a dcgm-exporter URL, or none (default: {default_help})",
    )


def api_key_of(args: Any, served: str | None = None) -> str | None:
    """The command's API key, resolved once here (the layers below take it as given):
    `--api-key`, else `served` (host mode: the key given to `vllm serve` after `--`), else
    $OPENAI_API_KEY, else $VLLM_API_KEY (core.credentials.resolve_api_key)."""
    from specmon.core.credentials import resolve_api_key

    given = getattr(args, "api_key", None)
    return resolve_api_key(given if given is not None else served)


def add_api_key_argument(parser: Any) -> None:
    """`--api-key` (the environment's key when not given; never shown or recorded)."""
    parser.add_argument(
        "--api-key",
        default=None,
        help="API key (default: $OPENAI_API_KEY or $VLLM_API_KEY); never printed or recorded",
    )
