"""Themes (ui/themes.py, themes/): the shipped ones load, ship inside the wheel, errors name the
file and line and fall back to the default, user themes come from XDG_CONFIG_HOME, and NO_COLOR
is honoured by Textual itself."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rich.color import Color, ColorSystem
from textual.app import App
from textual.filter import Monochrome

from specmon.ui.themes import (
    DEFAULT_THEME,
    LoadedThemes,
    ThemeFileError,
    bundled_theme_dir,
    load_theme_file,
    load_themes,
    parse_theme,
    resolve_theme,
    user_theme_dir,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {"specmon-dark": True, "specmon-light": False, "specmon-high-contrast": True}
HEAT_VARIABLES = ("heat-many", "heat-some", "heat-single", "heat-unknown", "heat-prefill")


def test_shipped_themes_load_with_heat_shades() -> None:
    assert bundled_theme_dir() == ROOT / "themes"
    loaded = load_themes((bundled_theme_dir(),))
    assert loaded.problems == []
    assert set(loaded.themes) == set(SHIPPED)
    for name, dark in SHIPPED.items():
        theme = loaded.themes[name]
        assert theme.dark is dark
        for var in HEAT_VARIABLES:
            assert var in theme.variables, (name, var)
        assert len({theme.variables[v] for v in HEAT_VARIABLES}) == len(HEAT_VARIABLES)


@pytest.mark.parametrize("name", sorted(SHIPPED))
@pytest.mark.parametrize(
    "system", [ColorSystem.TRUECOLOR, ColorSystem.EIGHT_BIT, ColorSystem.STANDARD]
)
def test_heat_shades_stay_apart_in_256_and_16_colours(name: str, system: ColorSystem) -> None:
    """docs/themes.md: under tmux without COLORTERM (256 colours) "many" and "some" both became
    colour 23. Rich's own conversion (what the terminal gets) must give five different colours."""
    theme = load_themes((bundled_theme_dir(),)).themes[name]
    shown = {
        var: Color.parse(theme.variables[var]).downgrade(system).get_truecolor()
        for var in HEAT_VARIABLES
    }
    assert len(set(shown.values())) == len(HEAT_VARIABLES), (name, system, shown)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('name = "x"\nprimary = \n', 2, "not valid TOML"),
        ('name = "x"\nprimary = "#12345z"\n', 2, "is not a colour"),
        ('name = "x"\nprimary = "red"\n\ncolour = "blue"\n', 4, "unknown key 'colour'"),
        ('name = "x"\nprimary = "red"\ndark = "yes"\n', 3, "dark must be true or false"),
        ('name = "x"\nprimary = "red"\ntext_alpha = 2\n', 3, "between 0 and 1"),
        ('name = "x"\nprimary = "red"\n[variables]\nprimary = 3\n', 4, "must be text"),
        ('primary = "red"\n', None, "needs a name"),
        ('name = "x"\n', None, "needs a primary colour"),
    ],
)
def test_errors_name_the_file_and_line(text: str, line: int | None, words: str) -> None:
    with pytest.raises(ThemeFileError) as info:
        parse_theme(text, "mine.toml")
    err = info.value
    assert err.path == "mine.toml" and err.line == line and words in err.message
    assert str(err).startswith(f"mine.toml:{line}: " if line else "mine.toml: ")


def test_a_broken_theme_falls_back_to_the_default_with_the_message(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\nprimary = "#4EA1F3"\nsurface = "nonsense"\n')
    # As a path:
    choice = resolve_theme(str(bad), load_themes((bundled_theme_dir(),)))
    assert choice.theme.name == DEFAULT_THEME
    assert choice.messages == (
        f"{bad}:3: surface = 'nonsense' is not a colour; using {DEFAULT_THEME}",
    )
    # As a name from a theme directory:
    loaded = load_themes((bundled_theme_dir(), tmp_path))
    assert [str(p) for p in loaded.problems] == [f"{bad}:3: surface = 'nonsense' is not a colour"]
    by_name = resolve_theme("broken", loaded)
    assert by_name.theme.name == DEFAULT_THEME and f"{bad}:3:" in by_name.messages[0]
    unknown = resolve_theme("no-such-theme", loaded)
    assert unknown.theme.name == DEFAULT_THEME
    assert "unknown theme 'no-such-theme'" in unknown.messages[0]
    assert "specmon-light" in unknown.messages[0]


def test_choice_by_name_path_and_textual_builtin() -> None:
    loaded = load_themes((bundled_theme_dir(),))
    assert resolve_theme(None, loaded).theme.name == DEFAULT_THEME
    assert resolve_theme("specmon-light", loaded).theme.name == "specmon-light"
    path = str(bundled_theme_dir() / "specmon-high-contrast.toml")
    assert resolve_theme(path, loaded).theme.name == "specmon-high-contrast"
    assert resolve_theme("nord", loaded).theme.name == "nord"
    assert resolve_theme("nord", loaded).messages == ()
    # Without the shipped themes at all, Textual's default is used and said so.
    empty = resolve_theme(None, LoadedThemes())
    assert empty.theme.name == "textual-dark" and empty.messages


def test_user_themes_from_xdg_config_home(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert user_theme_dir(env) == tmp_path / "specmon" / "themes"
    assert user_theme_dir({"XDG_CONFIG_HOME": "relative"}) == (
        Path.home() / ".config" / "specmon" / "themes"
    )
    d = user_theme_dir(env)
    d.mkdir(parents=True)
    (d / "mine.toml").write_text('name = "mine"\nprimary = "#FF0000"\ndark = false\n')
    # A user theme with a shipped name replaces the shipped one.
    (d / "dark.toml").write_text('name = "specmon-dark"\nprimary = "#00FF00"\n')
    loaded = load_themes(environ=env)
    assert {"mine", "specmon-light", "specmon-dark"} <= set(loaded.themes)
    assert loaded.themes["specmon-dark"].primary == "#00FF00"
    assert loaded.files["mine"] == d / "mine.toml"
    assert resolve_theme("mine", loaded).theme.dark is False


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ThemeFileError, match="cannot read"):
        load_theme_file(tmp_path / "absent.toml")


def test_shipped_themes_answer_to_their_short_names() -> None:
    """The README's names (dark, light, high-contrast) pick specmon's themes, with no message;
    a theme of the user's or Textual's with that exact name still comes first."""
    loaded = load_themes((bundled_theme_dir(),))
    for short in ("dark", "light", "high-contrast"):
        choice = resolve_theme(short, loaded)
        assert choice.theme.name == f"specmon-{short}"
        assert choice.messages == ()
    loaded.themes["light"] = loaded.themes["specmon-dark"]
    assert resolve_theme("light", loaded).theme.name == "specmon-dark"


def test_a_theme_path_that_is_no_small_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ThemeFileError, match="not a regular file"):
        load_theme_file("/dev/zero")
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ThemeFileError, match="larger than 1 MiB"):
        load_theme_file(big)
    choice = resolve_theme("/dev/zero", load_themes((bundled_theme_dir(),)))
    assert choice.theme.name == DEFAULT_THEME
    assert "/dev/zero" in choice.messages[0]


class _Host(App[None]):
    pass


async def test_theme_applies_in_a_textual_app() -> None:
    loaded = load_themes((bundled_theme_dir(),))
    app = _Host()
    for theme in loaded.themes.values():
        app.register_theme(theme)
    async with app.run_test() as pilot:
        app.theme = "specmon-high-contrast"
        await pilot.pause()
        assert app.current_theme.name == "specmon-high-contrast"
        assert app.theme_variables["heat-many"] == "#006C2D"
        assert app.theme_variables["background"].upper() in ("#000000", "#000")


def test_no_color_is_honoured_by_textual(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    plain = _Host()
    assert plain.no_color is False
    assert not any(isinstance(f, Monochrome) for f in plain._filters)
    monkeypatch.setenv("NO_COLOR", "1")
    mono = _Host()
    assert mono.no_color is True
    assert any(isinstance(f, Monochrome) for f in mono._filters)


def test_themes_ship_inside_the_wheel(tmp_path: Path) -> None:
    from hatchling.builders.wheel import WheelBuilder

    builder = WheelBuilder(str(ROOT))
    (wheel,) = list(builder.build(directory=str(tmp_path), versions=["standard"]))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for name in SHIPPED:
            member = f"specmon/themes/{name}.toml"
            assert member in names
            theme = parse_theme(zf.read(member).decode("utf-8"), member)
            assert theme.name == name
        assert "specmon/ui/themes.py" in names
        zf.extractall(tmp_path / "site")
    # Installed from the wheel (no source tree beside it), the loader finds them in the package.
    code = (
        "from specmon.ui.themes import bundled_theme_dir, load_themes\n"
        "loaded = load_themes((bundled_theme_dir(),))\n"
        "print(bundled_theme_dir().relative_to(bundled_theme_dir().parents[1]))\n"
        "print(sorted(loaded.themes), loaded.problems)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": ""},
    ).stdout.splitlines()
    assert out == ["specmon/themes", f"{sorted(SHIPPED)} []"]
