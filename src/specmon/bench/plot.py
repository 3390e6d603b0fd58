"""`specmon sweep --plot FILE`: the sweep as a PNG or SVG, through matplotlib (the optional extra
`pip install 'specmon[plot]'`). Bars: mean output tok/s per n_spec with the spread over the repeats
as error bars, one group per concurrency; a line on the right axis: p95 E2EL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FORMATS = (".png", ".svg")


class PlotUnavailable(RuntimeError):
    """matplotlib is missing, or the file type is not one it writes here."""


def check_plot_target(path: str) -> None:
    """Fail early (before a long sweep) when the plot cannot be written."""
    if Path(path).suffix.lower() not in FORMATS:
        raise PlotUnavailable(f"--plot FILE must end in .png or .svg, got {path!r}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'specmon[plot]' (or pip install matplotlib)"
        ) from None


P95_COLORS = ("#111111", "#8B0000", "#4B0082", "#B8860B")
"""The p95 E2EL lines' colours, one per concurrency: dark or strong, none of them in the bars'
colour cycle (matplotlib's default cycle starts at C0 blue on both axes, so a line of the same
colour as its bars vanished into them)."""


def write_plot(summary: Any, path: str) -> None:
    """Draw the sweep summary to `path` (.png or .svg)."""
    check_plot_target(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = build_figure(summary)
    fig.savefig(path)
    plt.close(fig)


def build_figure(summary: Any) -> Any:
    """The sweep's matplotlib Figure: bars (mean tok/s) on the left axis, the p95 E2EL lines on
    the right axis (both axes start at zero), drawn above the bars (the right axis' z-order is
    raised, its background transparent) in colours the bars do not use, with white-edged
    markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    concs = sorted({c.concurrency for c in summary.cells})
    points = sorted({c.n_spec for c in summary.cells})
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(points) * len(concs) + 3), 4.5))
    ax2 = ax.twinx()
    ax2.set_zorder(ax.get_zorder() + 1)  # the lines above the bars, whatever the backend
    ax2.patch.set_visible(False)  # and the bars still seen through the right axis
    width = 0.8 / max(1, len(concs))
    for j, conc in enumerate(concs):
        cells = {c.n_spec: c for c in summary.cells if c.concurrency == conc}
        xs = [i + (j - (len(concs) - 1) / 2) * width for i, _ in enumerate(points)]
        heights = [cells[n].tok_s.value if n in cells and cells[n].tok_s else 0.0 for n in points]
        errs = [
            (cells[n].tok_s.sd or 0.0) if n in cells and cells[n].tok_s else 0.0 for n in points
        ]
        ax.bar(
            xs, heights, width, yerr=errs, capsize=3, alpha=0.75, label=f"tok/s, concurrency {conc}"
        )
        p95 = [
            cells[n].e2el_p95_ms.value if n in cells and cells[n].e2el_p95_ms else float("nan")
            for n in points
        ]
        ax2.plot(
            xs,
            p95,
            color=P95_COLORS[j % len(P95_COLORS)],
            marker="o",
            markersize=6,
            markeredgecolor="white",
            linewidth=2,
            linestyle="--",
            label=f"p95 E2EL, concurrency {conc}",
        )
    ax.set_xticks(range(len(points)), [f"n={n}" for n in points])
    ax.set_xlabel("num_speculative_tokens")
    ax.set_ylabel("mean output tok/s (± sd over repeats)")
    ax2.set_ylabel("p95 E2EL (ms)")
    # Both axes from zero: a p95 axis from 685 ms draws an 8% difference within the noise as a
    # cliff. Only the bottom is set; matplotlib keeps its own top (and NaN points leave none).
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    title = "specmon sweep" + (" (SIMULATED)" if summary.simulated else "")
    ax.set_title(title)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    fig.legend(
        handles[0] + handles2[0], handles[1] + handles2[1], loc="lower center", ncol=2, fontsize=8
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
