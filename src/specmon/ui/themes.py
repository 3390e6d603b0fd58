"""Colour themes: TOML files loaded into Textual `Theme` objects.

Where themes come from, later ones replacing earlier ones of the same name:
1. the themes shipped with specmon (the repository's `themes/`, packaged in the wheel as
   `specmon/themes/`): specmon-dark (the default), specmon-light, specmon-high-contrast;
2. the user's own, `$XDG_CONFIG_HOME/specmon/themes/*.toml` (`~/.config/specmon/themes` when
   XDG_CONFIG_HOME is unset), the pattern posting uses.

A theme file holds the fields of `textual.theme.Theme` at the top level (`name`, `primary`,
`secondary`, `accent`, `foreground`, `background`, `surface`, `panel`, `boost`, `warning`,
`error`, `success`, `dark`, `luminosity_spread`, `text_alpha`) and a `[variables]` table of
design variables (specmon's own: `heat-many`, `heat-some`, `heat-single`, `heat-unknown`,
`heat-prefill`, `simulated`). A file with errors (bad TOML, an unknown key, a colour Textual
cannot parse, a missing name or primary) is reported as `FILE:LINE: message` and left out; a
`--theme` that cannot be used falls back to the default theme with that message.

NO_COLOR: Textual honours it by itself (an `App` created while NO_COLOR is set, to any value,
adds its Monochrome filter and `App.no_color` is True; tests/component/test_themes.py checks
it), and so does Rich for `watch --once`. Themes need no rule of their own for it.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

DEFAULT_THEME = "specmon-dark"
SHORT_NAME_PREFIX = "specmon-"
"""specmon's themes answer to their name without it too: `--theme light` is specmon-light."""

COLOR_FIELDS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "warning",
    "error",
    "success",
)
FLOAT_FIELDS = ("luminosity_spread", "text_alpha")
KNOWN_KEYS = frozenset({"name", "dark", "variables", *COLOR_FIELDS, *FLOAT_FIELDS})

_TOML_LINE = re.compile(r"at line (\d+)")


class ThemeFileError(ValueError):
    """A theme file that cannot be used: `str()` is `FILE:LINE: message` (no line when the
    problem is the whole file)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


def _line_of(text: str, key: str, table: str | None = None) -> int | None:
    """The 1-based line where `key = …` is set (inside `[table]` when given)."""
    in_table = table is None
    pattern = re.compile(rf"""^\s*(["']?){re.escape(key)}\1\s*=""")
    header = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")
    for number, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            in_table = table is not None and m.group(1).strip() == table
            continue
        if in_table and pattern.match(line):
            return number
    return None


def parse_theme(text: str, path: str = "<theme>") -> Theme:
    """A Theme from a theme file's text; ThemeFileError naming `path` and the line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE.search(str(exc))
        message = re.sub(r"\s*\(at line \d+(, )?", " (", str(exc)).replace(" ()", "")
        raise ThemeFileError(
            path, int(m.group(1)) if m else None, f"not valid TOML: {message}"
        ) from None
    return _theme_from(data, text, path)


def _theme_from(data: dict[str, Any], text: str, path: str) -> Theme:
    def fail(key: str, message: str, table: str | None = None) -> ThemeFileError:
        return ThemeFileError(path, _line_of(text, key, table), message)

    for key in data:
        if key not in KNOWN_KEYS:
            raise fail(key, f"unknown key {key!r} (known: {', '.join(sorted(KNOWN_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(path, _line_of(text, "name"), "a theme needs a name (text)")
    if "primary" not in data:
        raise ThemeFileError(path, None, "a theme needs a primary colour")
    kwargs: dict[str, Any] = {"name": name.strip()}
    for key in COLOR_FIELDS:
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, str):
            raise fail(key, f'{key} must be a colour in quotes, e.g. "#4EA1F3"')
        try:
            Color.parse(value)
        except ColorParseError:
            raise fail(key, f"{key} = {value!r} is not a colour") from None
        kwargs[key] = value
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise fail("dark", "dark must be true or false")
    kwargs["dark"] = dark
    for key in FLOAT_FIELDS:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise fail(key, f"{key} must be a number")
            if not 0.0 <= float(value) <= 1.0:
                raise fail(key, f"{key} must be between 0 and 1, got {value}")
            kwargs[key] = float(value)
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise fail("variables", "variables must be a table: [variables]")
    clean: dict[str, str] = {}
    for key, value in variables.items():
        if not isinstance(value, str):
            raise fail(key, f"variable {key!r} must be text in quotes", "variables")
        clean[key] = value
    kwargs["variables"] = clean
    return Theme(**kwargs)


MAX_THEME_FILE_BYTES = 1 << 20
"""The largest theme file read (1 MiB): a theme is a few dozen lines."""


def load_theme_file(path: str | os.PathLike[str]) -> Theme:
    """A Theme from a file; ThemeFileError naming the file (and line) when it cannot be used. A
    device, a FIFO or a file over MAX_THEME_FILE_BYTES is refused before it is read."""
    p = Path(path)
    try:
        if not stat.S_ISREG(p.stat().st_mode):
            raise ThemeFileError(str(p), None, "not a regular file")
        with p.open("rb") as f:
            data = f.read(MAX_THEME_FILE_BYTES + 1)
        if len(data) > MAX_THEME_FILE_BYTES:
            raise ThemeFileError(str(p), None, "larger than 1 MiB; a theme file is small")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(str(p), None, f"cannot read: {exc}") from None
    return parse_theme(text, str(p))


def bundled_theme_dir() -> Path:
    """The shipped themes: `specmon/themes` inside an installed wheel, else the source tree's
    `themes/` (a checkout, or an editable install)."""
    here = Path(__file__).resolve()
    packaged = here.parents[1] / "themes"
    if packaged.is_dir():
        return packaged
    return here.parents[3] / "themes"


def user_theme_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/specmon/themes`, or `~/.config/specmon/themes`."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "specmon" / "themes"


@dataclass
class LoadedThemes:
    """Themes by name, and the files that could not be used."""

    themes: dict[str, Theme] = field(default_factory=dict)
    problems: list[ThemeFileError] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    """Where each theme was read from."""


def load_themes(
    dirs: tuple[Path, ...] | None = None, *, environ: Mapping[str, str] | None = None
) -> LoadedThemes:
    """Every `*.toml` theme in `dirs` (default: the bundled ones, then the user's), in name
    order per directory; later directories replace earlier themes of the same name."""
    if dirs is None:
        dirs = (bundled_theme_dir(), user_theme_dir(environ))
    out = LoadedThemes()
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                out.problems.append(exc)
                continue
            out.themes[theme.name] = theme
            out.files[theme.name] = path
    return out


@dataclass(frozen=True, slots=True)
class ThemeChoice:
    """The theme to use and, when the requested one could not be used, why (one line each)."""

    theme: Theme
    messages: tuple[str, ...] = ()


def _fallback(loaded: LoadedThemes) -> Theme:
    theme = loaded.themes.get(DEFAULT_THEME)
    return theme if theme is not None else BUILTIN_THEMES["textual-dark"]


def resolve_theme(choice: str | None, loaded: LoadedThemes | None = None) -> ThemeChoice:
    """The theme for `--theme CHOICE`: a theme name (specmon's, the user's, or one of Textual's
    built-in ones) or the path of a theme file. None: the default. Anything that cannot be used
    gives the default theme and a message naming the file and line, or the known names."""
    loaded = loaded if loaded is not None else load_themes()
    if choice is None or choice == DEFAULT_THEME:
        messages: tuple[str, ...] = ()
        if DEFAULT_THEME not in loaded.themes:
            messages = tuple(str(p) for p in loaded.problems) or (
                f"theme {DEFAULT_THEME!r} not found; using Textual's default",
            )
        return ThemeChoice(_fallback(loaded), messages)
    if choice.endswith(".toml") or os.sep in choice:
        try:
            return ThemeChoice(load_theme_file(choice))
        except ThemeFileError as exc:
            return ThemeChoice(_fallback(loaded), (f"{exc}; using {DEFAULT_THEME}",))
    theme = (
        loaded.themes.get(choice)
        or loaded.themes.get(f"{SHORT_NAME_PREFIX}{choice}")  # `light` for specmon-light
        or BUILTIN_THEMES.get(choice)
    )
    if theme is not None:
        return ThemeChoice(theme)
    broken = [p for p in loaded.problems if Path(p.path).stem == choice]
    if broken:
        return ThemeChoice(_fallback(loaded), tuple(f"{p}; using {DEFAULT_THEME}" for p in broken))
    names = ", ".join(sorted(loaded.themes) + sorted(BUILTIN_THEMES))
    return ThemeChoice(
        _fallback(loaded), (f"unknown theme {choice!r}; using {DEFAULT_THEME} (known: {names})",)
    )
