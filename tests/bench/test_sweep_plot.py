"""`specmon sweep --plot`: the p95 E2EL line is seen over the bars (docs/bench.md, "`specmon
sweep`")."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from specmon.bench.plot import build_figure, write_plot

pytest.importorskip("matplotlib")


def _summary() -> SimpleNamespace:
    def stat(value: float, sd: float | None = None) -> SimpleNamespace:
        return SimpleNamespace(value=value, sd=sd)

    cells = [
        SimpleNamespace(
            concurrency=c, n_spec=n, tok_s=stat(100 + 10 * n + c, 3.0), e2el_p95_ms=stat(500 + n)
        )
        for c in (1, 2)
        for n in (0, 4, 8)
    ]
    return SimpleNamespace(cells=cells, simulated=True)


def test_the_p95_line_is_drawn_over_the_bars_in_its_own_colour(tmp_path: Path) -> None:
    """The line had matplotlib's first colour on its own axis, the bars' colour too, so it
    vanished into them. In the SVG (drawn in document order) each p95 line must come after every
    bar and have a colour no bar has."""
    path = tmp_path / "sweep.svg"
    write_plot(_summary(), str(path))
    svg = path.read_text()
    elements = re.findall(r'<g id="(patch_\d+|line2d_\d+)">\s*<path[^>]*style="([^"]*)"', svg)
    bar_fills: set[str] = set()
    last_bar = -1
    lines: list[tuple[int, str]] = []
    for i, (gid, style) in enumerate(elements):
        fill = re.search(r"(?:^|; )fill: (#[0-9a-f]{6})", style)
        stroke = re.search(r"stroke: (#[0-9a-f]{6})", style)
        if gid.startswith("patch") and fill and fill.group(1) != "#ffffff":
            bar_fills.add(fill.group(1))
            last_bar = max(last_bar, i) if len(lines) == 0 else last_bar
        if gid.startswith("line2d") and "stroke-dasharray" in style and stroke:
            lines.append((i, stroke.group(1)))
    assert len(bar_fills) == 2 and len(lines) >= 2  # two concurrencies: 2 bar colours, 2 lines
    for at, colour in lines[:2]:  # the plotted lines (the legend's samples follow)
        assert at > last_bar
        assert colour not in bar_fills, (colour, bar_fills)


def test_both_axes_start_at_zero() -> None:
    """p95 E2EL of 685 and 740 ms drawn on an axis from 685 ms looked like a cliff; from zero the
    8% is what it is. The bars' axis starts at zero too."""
    summary = _summary()
    for cell, p95 in zip(summary.cells, (685.0, 700.0, 740.0) * 2, strict=True):
        cell.e2el_p95_ms = SimpleNamespace(value=p95, sd=None)
    import matplotlib.pyplot as plt

    fig = build_figure(summary)
    bars, p95_axis = fig.axes[:2]
    bottom = bars.get_ylim()[0]
    low, high = p95_axis.get_ylim()
    plt.close(fig)
    assert bottom == 0
    assert low == 0 and high >= 740
