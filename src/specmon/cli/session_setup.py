"""Choices that `watch`, `demo` and `chat` make the same way: the vanilla baseline the flag
compares against, where GPU numbers come from by default, and the colour theme."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from specmon.cli.args import positive_float
from specmon.sources.addresses import url_is_loopback


def add_baseline_argument(parser: argparse.ArgumentParser, *, recorded: bool = False) -> None:
    """`--baseline`; `recorded` (replay): the recording's baseline comes before the stored one."""
    default = "the one the recording was judged against (its header), else " if recorded else ""
    parser.add_argument(
        "--baseline",
        type=positive_float,
        default=None,
        metavar="TOK_S",
        help="vanilla (n_spec 0) decode tok/s of this model on this GPU, for the vanilla-speed "
        f"flag (default: {default}the stored n_spec 0 bench for the same model + GPU + vLLM "
        "version, if any; without one only acceptance-based reasons apply); a recording "
        "(--record) carries the baseline in effect",
    )


class DefaultText(str):
    """The value of a text option left out on the command line, so the user's config file may
    replace it (cli.user_config) while a flag given with the default's own text still wins."""

    __slots__ = ()


DEFAULT_THEME = "specmon-dark"
"""The app's theme without --theme (ui/themes.py's DEFAULT_THEME; kept here as text so that
registering the commands imports no textual)."""


def add_theme_argument(parser: argparse.ArgumentParser) -> None:
    """`--theme NAME|FILE` for the commands that open the app (the app resolves it; a theme that
    cannot be used gives the default theme and a one-line notice naming the file and line)."""
    parser.add_argument(
        "--theme",
        default=DefaultText(DEFAULT_THEME),  # left out: [app] theme of the config file may apply
        metavar="NAME|FILE",
        help="colour theme: specmon-dark (default), specmon-light, specmon-high-contrast, a "
        "theme of $XDG_CONFIG_HOME/specmon/themes, one of Textual's, or a .toml theme file; "
        "NO_COLOR=1 makes the app monochrome; [app] theme of the config file sets your default",
    )


def default_gpu_source(urls: Sequence[str]) -> str:
    """ "local" (NVML) when every attached server runs on this machine, else "none": the GPU of a
    remote server is not the one NVML sees here (read it from its dcgm-exporter with --gpu URL)."""
    return "local" if urls and all(url_is_loopback(u) for u in urls) else "none"


def gpu_choice(given: str | None, urls: Sequence[str]) -> str:
    """`--gpu` as given (checked by its argument type), else from where the servers are
    (`default_gpu_source`)."""
    return given if given is not None else default_gpu_source(urls)


def redact_pattern(text: str) -> str:
    """argparse type: a regular expression usable by --redact (core.redaction), each checked on
    its own: a bad one is one line naming it (`argument --redact: 'PATTERN': why`), exit 2."""
    from specmon.core.redaction import RedactPatternError, compile_redaction

    try:
        compile_redaction(text)
    except RedactPatternError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--redact ")) from None
    return text


def add_redact_argument(parser: argparse.ArgumentParser) -> None:
    """`--redact REGEX` (repeatable) for the commands that record answers."""
    parser.add_argument(
        "--redact",
        action="append",
        default=[],
        type=redact_pattern,
        metavar="REGEX",
        help="replace what REGEX (Python syntax) matches by [REDACTED] in what is written: "
        "recordings (--record, the app's r key) and saved chats (repeatable; "
        "docs/recording-format.md)",
    )
