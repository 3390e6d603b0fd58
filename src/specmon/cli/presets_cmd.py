"""`specmon presets`: the working configurations host mode can start, built-in and the user's.

Built-in presets come from the seeds, the published runs specmon's defaults come from (README,
"The published runs ('the seeds')"); each names its seed and the vLLM build it was proven on;
add your own in $XDG_CONFIG_HOME/specmon/config.toml (or the file $SPECMON_CONFIG names), as
[presets.NAME] tables (docs/host.md). Flags of `specmon serve` override a preset's values.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from specmon.cli.args import add_command, fail

NAME = "presets"
SEED_NOTE = (
    "seed: where a preset comes from; a built-in preset's is one of the published runs that "
    "specmon's defaults come from (README, \"The published runs ('the seeds')\")"
)
"""Printed after the listing: what the `seed:` lines refer to."""
SUMMARY = "list the host-mode presets (the seeds' working vLLM configurations, and yours)"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument("name", nargs="?", help="show one preset")


@dataclass(frozen=True, slots=True)
class PresetsPlan:
    name: str | None = None


def plan_from(args: argparse.Namespace) -> PresetsPlan:
    return PresetsPlan(args.name)


def run(plan: PresetsPlan) -> int:
    from specmon.sources.host.presets import (
        PresetError,
        all_presets,
        config_path,
        find_preset,
        preset_listing,
    )

    try:
        presets = all_presets()
        if plan.name:
            presets = {plan.name: find_preset(plan.name, presets)}
    except PresetError as exc:
        return fail(NAME, str(exc))
    print(preset_listing(presets))
    if any(p.seed for p in presets.values()):
        print(f"\n{SEED_NOTE}")
    if not plan.name:
        print(f"\nyour presets: {config_path()} ([presets.NAME] tables; see docs/host.md)")
    return 0
