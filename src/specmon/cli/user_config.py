"""The user's defaults from the config file, merged into a command's arguments before its plan is
read: a flag always beats the file, the file beats the built-in default (docs/app.md,
"Configuration"; the file is read and checked by sources/user_config.py)."""

from __future__ import annotations

import argparse

from specmon.cli.session_setup import DefaultText
from specmon.sources.user_config import ConfigError as ConfigError
from specmon.sources.user_config import UserConfig as UserConfig
from specmon.sources.user_config import load_user_config as load_user_config

THEME_COMMANDS = ("chat", "demo", "replay", "serve", "watch", "fleet")
"""The commands that open the app and so read [app] theme."""


def applies_to(command: str | None) -> bool:
    """Whether a command reads the config file's defaults."""
    return command in THEME_COMMANDS


def apply_user_config(args: argparse.Namespace, config: UserConfig) -> None:
    """Fill what the command line left out from the file (a flag always wins)."""
    command = args.command
    if isinstance(getattr(args, "theme", None), DefaultText) and config.theme is not None:
        args.theme = config.theme
    if command == "watch":
        attached = args.prometheus is None
        if attached and args.attach is None and config.watch_attach is not None:
            args.attach = list(config.watch_attach)
        if attached and args.interval is None and config.watch_interval is not None:
            args.interval = config.watch_interval
        if args.baseline is None and config.baseline_tok_s is not None:
            args.baseline = config.baseline_tok_s
        # The file's canary is for a running watch of servers; --once and --prometheus have none.
        if attached and not args.once and args.canary is None and config.watch_canary:
            args.canary = config.watch_canary
    elif command == "fleet":  # `watch --prometheus` under its own name: the same defaults
        if args.baseline is None and config.baseline_tok_s is not None:
            args.baseline = config.baseline_tok_s
    elif command == "chat":
        from specmon.runtime.host_plan import HostFlags

        # Not for a saved conversation (it goes back to its own server) nor when a host-mode
        # flag asks specmon to start vLLM; --model alone picks the model on the file's server.
        saved = args.resume is not None or args.export_chat is not None
        host = bool(HostFlags.of(args).given())
        if args.attach is None and config.chat_attach is not None and not (saved or host):
            args.attach = config.chat_attach


def effective_settings(config: UserConfig) -> list[tuple[str, str, str]]:
    """(setting, value, source) rows for `specmon config`: source is `file` or `default`."""
    import json

    from specmon.cli.session_setup import DEFAULT_THEME

    def text(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)  # control characters shown escaped

    canary = config.watch_canary
    rows = [
        (
            "watch.attach",
            ", ".join(text(u) for u in config.watch_attach)
            if config.watch_attach
            else "(none: give --attach or --prometheus)",
        ),
        (
            "watch.interval",
            f"{config.watch_interval:g} s" if config.watch_interval is not None else "1 s",
        ),
        ("watch.canary", f"every {canary:g} s" if canary else "off"),
        ("chat.attach", text(config.chat_attach) if config.chat_attach else "(none)"),
        ("app.theme", text(config.theme) if config.theme is not None else DEFAULT_THEME),
        (
            "baseline.tok_s",
            f"{config.baseline_tok_s:g}"
            if config.baseline_tok_s is not None
            else "(none: the stored n_spec 0 bench, if any)",
        ),
    ]
    return [(name, value, "file" if name in config.set_keys else "default") for name, value in rows]
