"""Reading the user's defaults from the config file (the merge, a flag beats the file, is
cli/user_config.py's): the servers `watch` and `chat` attach to, the theme,
watch's scrape interval, baseline and canary (docs/app.md, "Configuration").

The file is the one that holds the user's presets: `$XDG_CONFIG_HOME/specmon/config.toml` (or
the file `$SPECMON_CONFIG` names), read with the standard library's tomllib:

    [watch]
    attach = ["http://gpu-box:8000"]   # one URL or a list; used when neither --attach nor
    interval = 1.0                     #   --prometheus is given
    canary = 300                       # seconds, or false (off: the default)

    [chat]
    attach = "http://gpu-box:8000"     # used when neither --attach nor a host-mode flag is given

    [app]
    theme = "specmon-light"            # every command that opens the app

    [baseline]
    tok_s = 41.5                       # watch's --baseline

A flag always beats the file, the file beats the built-in default. Every key and type is
checked, an unknown section or key is named: a bad file is one line naming the file and the key
(or the line, for a TOML error), exit 2. The file names servers and numbers, never a program to
run or an environment (only presets do, docs/web.md "Files people share").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmon.core.canary import DEFAULT_INTERVAL_S as DEFAULT_CANARY_S
from specmon.core.canary import MAX_INTERVAL_S as MAX_CANARY_S
from specmon.core.canary import MIN_INTERVAL_S as MIN_CANARY_S
from specmon.core.scrape_interval import MAX_INTERVAL_S, MIN_INTERVAL_S

MAX_ATTACH = 64
"""The most servers one `[watch] attach` list names."""
MAX_TEXT = 4096
"""The longest text value (a URL, a theme name or file)."""

SECTIONS: dict[str, tuple[str, ...]] = {
    "watch": ("attach", "interval", "canary"),
    "chat": ("attach",),
    "app": ("theme",),
    "baseline": ("tok_s",),
}
"""The sections and keys read here ([presets.NAME] tables are host mode's: sources.host.presets)."""
OTHER_SECTIONS = ("presets",)


class ConfigError(Exception):
    """A config file that cannot be used: one line naming the file and the key or line."""


@dataclass(frozen=True)
class UserConfig:
    """What the file sets (None: not set, the built-in default applies)."""

    path: Path
    found: bool
    watch_attach: tuple[str, ...] | None = None
    watch_interval: float | None = None
    watch_canary: float | None = None
    """Seconds between canary probes; 0.0 when the file turns the canary off (`false`)."""
    chat_attach: str | None = None
    theme: str | None = None
    baseline_tok_s: float | None = None
    set_keys: tuple[str, ...] = field(default=())
    """The keys the file sets, as `section.key`."""


def load_user_config(path: Path | None = None) -> UserConfig:
    """The file's settings (none when it does not exist); ConfigError when it is bad."""
    from specmon.sources.host.presets import PresetError, config_path, read_config_toml

    path = path or config_path()
    try:
        doc = read_config_toml(path)
    except PresetError as exc:
        raise ConfigError(str(exc)) from None
    if doc is None:
        return UserConfig(path=path, found=False)
    values: dict[str, Any] = {}
    set_keys: list[str] = []
    for section, table in doc.items():
        if section in OTHER_SECTIONS:
            continue
        keys = SECTIONS.get(section)
        if keys is None:
            known = ", ".join(f"[{s}]" for s in (*SECTIONS, *OTHER_SECTIONS))
            raise ConfigError(f"{path}: unknown section or key {section!r}; known: {known}")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section} must be a table ([{section}])")
        for key, value in table.items():
            if key not in keys:
                raise ConfigError(
                    f"{path}: unknown key {section}.{key}; [{section}] takes: {', '.join(keys)}"
                )
            where = f"{path}: {section}.{key}"
            values[f"{section}_{key}"] = _checked(where, section, key, value)
            set_keys.append(f"{section}.{key}")
    return UserConfig(
        path=path,
        found=True,
        watch_attach=values.get("watch_attach"),
        watch_interval=values.get("watch_interval"),
        watch_canary=values.get("watch_canary"),
        chat_attach=values.get("chat_attach"),
        theme=values.get("app_theme"),
        baseline_tok_s=values.get("baseline_tok_s"),
        set_keys=tuple(set_keys),
    )


def _checked(where: str, section: str, key: str, value: Any) -> Any:
    if key == "attach":
        if section == "watch" and isinstance(value, str):
            value = [value]
        if section == "watch":
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{where}: must be a URL or a non-empty list of URLs")
            if len(value) > MAX_ATTACH:
                raise ConfigError(f"{where}: at most {MAX_ATTACH} servers, got {len(value)}")
            return tuple(_url(where, v) for v in value)
        return _url(where, value)
    if key == "theme":
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
            raise ConfigError(f"{where}: must be a theme name or a .toml theme file")
        return value
    if key == "canary" and isinstance(value, bool):
        return DEFAULT_CANARY_S if value else 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where}: must be a number, got {type(value).__name__}")
    number = float(value)
    if key == "interval" and not MIN_INTERVAL_S <= number <= MAX_INTERVAL_S:
        raise ConfigError(
            f"{where}: must be a number of seconds from {MIN_INTERVAL_S:g} to "
            f"{MAX_INTERVAL_S:g}, got {value}"
        )
    if key == "canary" and not MIN_CANARY_S <= number <= MAX_CANARY_S:
        raise ConfigError(
            f"{where}: must be a number of seconds from {MIN_CANARY_S:g} to {MAX_CANARY_S:g} "
            f"(or false: off), got {value}"
        )
    if key == "tok_s" and not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"{where}: must be a positive number of tok/s, got {value}")
    return number


def _url(where: str, value: Any) -> str:
    """A server's address, checked as `--attach URL` is (the session's reading of it), kept as
    written."""
    from specmon.sources.server_identity import server_base

    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ConfigError(f"{where}: must be a server URL such as http://gpu-box:8000")
    try:
        server_base(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value
