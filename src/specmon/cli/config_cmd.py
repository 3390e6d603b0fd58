"""`specmon config`: which config file was read and the defaults it sets.

The file is $XDG_CONFIG_HOME/specmon/config.toml (~/.config/specmon/config.toml), or the file
$SPECMON_CONFIG names. Besides your presets ([presets.NAME], `specmon presets`) it holds the
defaults you set once:

    [watch]
    attach = ["http://gpu-box:8000"]   # watch's --attach (one URL or a list)
    interval = 1.0                     # watch's --interval (seconds between scrapes)
    canary = 300                       # watch's --canary (seconds, or false: off)

    [chat]
    attach = "http://gpu-box:8000"     # chat's --attach

    [app]
    theme = "specmon-light"            # --theme of every command that opens the app

    [baseline]
    tok_s = 41.5                       # watch's --baseline (vanilla decode tok/s)

A flag always beats the file; the file beats the built-in default. This command prints the file
read (or "none found") and each setting with its value and source (file or default).

Exit status: 0; 2 when the file is bad (one line naming the file and the key, or the line).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from specmon.cli.args import add_command, fail

NAME = "config"
SUMMARY = "show the config file read and the defaults it sets (watch, chat, theme, baseline)"


def register(subparsers: Any) -> None:
    add_command(subparsers, NAME, SUMMARY, __doc__)


@dataclass(frozen=True, slots=True)
class ConfigPlan:
    """`specmon config` takes no options."""


def plan_from(_args: argparse.Namespace) -> ConfigPlan:
    return ConfigPlan()


def run(_plan: ConfigPlan) -> int:
    from specmon.cli.user_config import ConfigError, effective_settings, load_user_config
    from specmon.sources.host.presets import PresetError, load_user_presets

    try:
        config = load_user_config()
        presets = load_user_presets(config.path) if config.found else ()
    except (ConfigError, PresetError) as exc:
        return fail(NAME, str(exc))
    if config.found:
        print(f"config file: {config.path}")
    else:
        print(f"config file: none found (looked for {config.path})")
    rows = effective_settings(config)
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        print(f"  {name:<{width}}  {value}  ({source})")
    print(f"  {'presets':<{width}}  {len(presets)} of yours ([presets.NAME]; `specmon presets`)")
    return 0
