"""The acceptance heat of an answer: each run of engine steps of one class (many drafts
accepted, some, a single token, unknown, prefill) shaded, the shades taken from the theme's
`heat-*` variables, and a legend line."""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from rich.text import Text

from specmon.core.step_heat import AnswerHeat, HeatClass, coalesce, many_bar
from specmon.ui.formatting import visible
from specmon.ui.styles import HEAT_DEFAULTS

HEAT_TEXT_STYLE: dict[HeatClass, str] = {
    "many": "",
    "some": "",
    "single": "underline",
    "unknown": "italic",
    "prefill": "",
}
"""Besides the shade: single-token steps underlined, unknown ones italic (readable without
colour, e.g. under NO_COLOR)."""


def heat_colors(variables: Mapping[str, str]) -> dict[HeatClass, str]:
    """The heat shades from a theme's CSS variables (`heat-many` …), else HEAT_DEFAULTS."""
    return {c: variables.get(f"heat-{c}", d) for c, d in HEAT_DEFAULTS.items()}


def heat_styles(colors: Mapping[HeatClass, str]) -> dict[HeatClass, Style]:
    """A Rich style per heat class: the shade as background, plus HEAT_TEXT_STYLE."""
    out: dict[HeatClass, Style] = {}
    for c, color in colors.items():
        extra = Style.parse(HEAT_TEXT_STYLE[c]) if HEAT_TEXT_STYLE[c] else Style()
        out[c] = Style(bgcolor=color) + extra
    return out


def heat_text(text: str, heat: AnswerHeat, styles: Mapping[HeatClass, Style]) -> Text:
    """The answer's plain text (control characters made visible, not parsed as Markdown) with
    each run of steps of one class styled: one span per run, no per-token objects. Text no
    span covers is left unstyled."""
    out = Text()
    at = 0
    for start, end, cls in coalesce(heat.spans):
        if start < at:
            start = at
        if end <= start:
            continue
        if start > at:
            out.append(visible(text[at:start]))
        out.append(visible(text[start:end]), style=styles[cls])
        at = end
    if at < len(text):
        out.append(visible(text[at:]))
    return out


def heat_legend(styles: Mapping[HeatClass, Style], n_spec: int | None) -> Text:
    """One line saying what the shades mean (the bar for "many" from K)."""
    bar = many_bar(n_spec)
    k = f"of {n_spec}" if n_spec else "(K unknown)"
    words: tuple[tuple[HeatClass, str], ...] = (
        ("many", f"step accepted {bar}+ drafts {k}"),
        ("some", "fewer"),
        ("single", "1 token/step (vanilla-like)"),
        ("unknown", "unknown (merged chunks)"),
        ("prefill", "prefill"),
    )
    out = Text("heat: ", style="bold")
    for i, (cls, word) in enumerate(words):
        if i:
            out.append("  ")
        out.append("  ", style=styles[cls])
        out.append(f" {word}")
    return out
