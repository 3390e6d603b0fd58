"""Colours come from the theme (docs/themes.md): switching `app.theme` redraws the dashboard's
status words in that theme's colours, and no module under ui/ names a colour except ui/styles.py
(the one home of the roles, and of `watch`'s console palette)."""

from __future__ import annotations

import ast
from pathlib import Path

from rich.color import Color
from rich.errors import StyleSyntaxError
from rich.style import Style
from rich.text import Text
from tests.support.ui_apps import WATCH_SIZE, watch_app, watch_ready
from tests.support.waiting import wait_for_app
from textual.content import Content
from textual.style import Style as TextualStyle
from textual.widgets import Static

import specmon.ui
from specmon.ui.styles import CONSOLE_STYLES
from specmon.ui.widgets.servers_table import ServersTable

UI = Path(specmon.ui.__file__).parent
COLOUR_HOME = {"styles.py"}
"""The modules allowed to name colours: the roles' home (the console palette, heat defaults)."""


def _colour_of(text: Text | Content, word: str) -> tuple[int, int, int] | None:
    """The foreground colour (RGB) the first `word` of rendered text is drawn in."""
    at = text.plain.index(word)
    style = Style()
    for span in text.spans:
        if span.start <= at < span.end:
            if isinstance(span.style, str):
                style += Style.parse(span.style)
            elif isinstance(span.style, TextualStyle):
                style += span.style.rich_style
            else:
                style += span.style
    return tuple(style.color.get_truecolor()) if style.color else None


def _rendered(widget: Static | ServersTable) -> Text | Content:
    out = widget.render()
    assert isinstance(out, Text | Content)
    return out


def _near(
    got: tuple[tuple[int, int, int] | None, ...], want: tuple[tuple[int, int, int], ...]
) -> bool:
    """The same colours, but for Textual's rounding (its colour system can differ by 1)."""
    return all(
        g is not None and max(abs(a - b) for a, b in zip(g, w, strict=True)) <= 2
        for g, w in zip(got, want, strict=True)
    )


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(Color.parse(colour).get_truecolor())


async def test_switching_the_theme_redraws_status_words_in_its_colours() -> None:
    app, _port = watch_app()
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        seen: dict[str, tuple[tuple[int, int, int] | None, ...]] = {}
        for theme in ("specmon-dark", "specmon-light", "specmon-high-contrast"):
            app.theme = theme
            want = app.get_theme(theme)
            assert want is not None and want.success and want.error

            def drawn() -> tuple[tuple[int, int, int] | None, ...]:
                panel = _rendered(app.screen.query_one("#panel-server", Static))
                table = _rendered(app.screen.query_one(ServersTable))
                return (
                    _colour_of(panel, "up"),
                    _colour_of(table, "down"),
                    _colour_of(table, "last error"),
                )

            expect = (_rgb(want.success), _rgb(want.error), _rgb(want.error))
            await wait_for_app(pilot, lambda drawn=drawn, expect=expect: _near(drawn(), expect))
            seen[theme] = drawn()
        assert len(set(seen.values())) == 3, seen  # each theme draws them differently


def _colour_literals(path: Path) -> list[str]:
    """Short string literals of a module that parse as a Rich style with a colour."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if len(node.value) > 40:
            continue
        try:
            style = Style.parse(node.value)
        except StyleSyntaxError:
            continue
        colours = [c for c in (style.color, style.bgcolor) if c is not None]
        if any(c.name != "default" for c in colours):
            found.append(f"{path.relative_to(UI)}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_under_ui_names_a_colour_but_the_styles_module() -> None:
    found = [
        hit
        for path in sorted(UI.rglob("*.py"))
        if path.relative_to(UI).as_posix() not in COLOUR_HOME
        for hit in _colour_literals(path)
    ]
    assert found == []


def test_the_scan_sees_colour_names_and_hex_codes() -> None:
    # the allow-listed console palette is what the scan would otherwise report
    assert _colour_literals(UI / "styles.py")
    assert Style.parse(f"bold {CONSOLE_STYLES.error}").color is not None
