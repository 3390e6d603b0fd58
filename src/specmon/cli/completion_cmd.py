"""`specmon completion SHELL`: print a completion script for bash, zsh or fish.

The script is generated from specmon's own command line (subcommands, options, choices) by
shtab; it is static, so completing never starts Python. Install it once:

    specmon completion bash > ~/.local/share/bash-completion/completions/specmon
    specmon completion zsh > ~/.zfunc/_specmon    # with fpath+=(~/.zfunc) before compinit
    specmon completion fish > ~/.config/fish/completions/specmon.fish

Generate it again after upgrading specmon (new commands or options).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from specmon.cli.args import add_command

NAME = "completion"
SUMMARY = "print a shell completion script (bash, zsh or fish)"
SHELLS = ("bash", "zsh", "fish")


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


@dataclass(frozen=True, slots=True)
class CompletionPlan:
    shell: str


def plan_from(args: argparse.Namespace) -> CompletionPlan:
    return CompletionPlan(args.shell)


def run(plan: CompletionPlan) -> int:
    print(completion_script(plan.shell), end="")
    return 0


def completion_script(shell: str) -> str:
    """specmon's completion script for `shell` (one of SHELLS)."""
    import shtab

    from specmon.cli.main import build_parser

    script: str = shtab.complete(build_parser(), shell=shell)
    return script if script.endswith("\n") else script + "\n"
