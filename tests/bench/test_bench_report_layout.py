"""bench's terminal report (bench/render.py) at 80, 100 and 160 columns: each value stays next to
its label, and draft positions are numbered from 1 as in the app (docs/bench.md)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from rich.console import Console

from specmon.bench.analysis import analyze
from specmon.bench.config import BenchConfig
from specmon.bench.render import summary_renderable
from specmon.bench.result import BenchResult, ServerInfo, summary_markdown

RATES = (0.734, 0.468, 0.298, 0.234, 0.153, 0.089, 0.048, 0.024)


def _result(rates: tuple[float, ...] = RATES) -> BenchResult:
    base = analyze([], server=ServerInfo(url="http://127.0.0.1:9", n_spec=8), config=BenchConfig())
    spec = dataclasses.replace(
        base.spec_decode,
        acceptance_length=3.05,
        acceptance_rate=0.256,
        drafts=124,
        draft_tokens=992,
        accepted=254,
        per_position=rates,
        metrics_available=True,
        client_al_mean=3.29,
    )
    return dataclasses.replace(base, spec_decode=spec)


def _render(result: BenchResult, width: int) -> list[str]:
    console = Console(width=width, record=True, highlight=False, color_system=None)
    with console.capture() as cap:
        console.print(summary_renderable(result))
    return [line.rstrip() for line in cap.get().splitlines()]


LABELS = {
    "acceptance length (/metrics)": "3.05",
    "draft acceptance rate": "25.6%",
    "drafts / draft tokens / accepted": "124 / 992 / 254",
    "AL per request, client chunks (mean)": "3.29",
}


@pytest.mark.parametrize("width", [80, 100, 160])
def test_values_stay_next_to_their_labels(width: int) -> None:
    """At 160 columns the per-position line stretched the value column: 'acceptance length
    (/metrics)' had its 3.05 some 80 columns away. The gap between the longest label and any
    value is now the same at every width and small."""
    lines = _render(_result(), width)
    for label, value in LABELS.items():
        (line,) = [ln for ln in lines if ln.startswith(label)]
        assert line.endswith(value), (label, line)
        assert len(line) <= 60, (width, line)  # label column (36) + padding + the widest value
    assert all(len(line) <= width for line in lines)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_positions_are_numbered_from_1(width: int) -> None:
    lines = _render(_result(), width)
    (head,) = [ln for ln in lines if ln.startswith("position")]
    (values,) = [ln for ln in lines if ln.startswith("accepted ")]
    assert head.split()[1:] == [str(i) for i in range(1, 9)]
    assert values.split()[1:] == [f"{r * 100:.1f}%" for r in RATES]
    # A position and its value end in the same column (right-aligned under each other).
    for n, rate in zip(range(1, 9), RATES, strict=True):
        at = re.search(rf"\b{n}\b", head[len("position") :])
        assert at is not None
        end = len("position") + at.end()
        assert values[:end].endswith(f"{rate * 100:.1f}%")


def test_many_positions_wrap_in_rows_that_fit_80_columns() -> None:
    rates = tuple(0.9 / (i + 1) for i in range(15))
    lines = _render(_result(rates), 80)
    heads = [ln for ln in lines if ln.startswith("position")]
    assert [h.split()[1:] for h in heads] == [
        [str(i) for i in range(1, 9)],
        [str(i) for i in range(9, 16)],
    ]
    assert all(len(line) <= 80 for line in lines)


def test_markdown_numbers_positions_from_1() -> None:
    md = summary_markdown(_result())
    table = md[md.index("| position | acceptance |") :]
    assert "| 1 | 73.4% |" in table and "| 8 | 2.4% |" in table and "| 0 |" not in table
