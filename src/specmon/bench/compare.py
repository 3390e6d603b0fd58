"""Runs side by side: each metric of runs B, C, … against run A, with the ratio and whether the
difference is larger than its noise (stats.differs: |Δ| > 2·sqrt(se_A² + se_B²)).

Where each metric's noise comes from (per run, from its own per-request records):
- output tok/s: the run's throughput with the relative standard error of its per-request output
  tok/s (sd/mean/sqrt(n));
- means (request tok/s, TTFT, TPOT, E2EL, ITL): sd/sqrt(n) over the requests (for ITL the
  requests' mean gaps);
- p95 / p99 E2EL: a seeded bootstrap over the requests' E2EL;
- acceptance length: the /metrics value with the standard error of the per-request ALs (server's
  when present, else tokens per chunk).
A metric without a noise estimate (a single request, no per-request values) gets no verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmon.bench.result import BenchResult, RequestRecord
from specmon.bench.stats import (
    Estimate,
    bootstrap_estimate,
    differs,
    mean_estimate,
    p95_of,
    ratio,
)
from specmon.core.percentiles import percentile_sorted


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str
    higher_is_better: bool | None
    """None: neither direction is better (ITL is per chunk: longer under speculation)."""
    estimate: Callable[[BenchResult], Estimate | None]


def _ok(result: BenchResult) -> list[RequestRecord]:
    return [r for r in result.requests if r.outcome == "ok"]


def _values(result: BenchResult, field: str) -> list[float]:
    out: list[float] = []
    for r in _ok(result):
        v = getattr(r, field)
        if isinstance(v, int | float):
            out.append(float(v))
    return out


def output_throughput(result: BenchResult) -> Estimate | None:
    value = result.summary.output_throughput
    if value is None:
        return None
    per_request = mean_estimate(_values(result, "output_tok_s"))
    if per_request is None or per_request.se is None or per_request.value == 0:
        return Estimate(value, None, result.summary.completed)
    return Estimate(value, value * per_request.se / per_request.value, per_request.n)


def _mean_of(field: str) -> Callable[[BenchResult], Estimate | None]:
    def get(result: BenchResult) -> Estimate | None:
        return mean_estimate(_values(result, field))

    return get


def _p(p: float) -> Callable[[Sequence[float]], float | None]:
    def stat(values: Sequence[float]) -> float | None:
        return percentile_sorted(sorted(values), p)

    return stat


def e2el_p95(result: BenchResult) -> Estimate | None:
    return bootstrap_estimate(_values(result, "e2el_ms"), p95_of)


def e2el_p99(result: BenchResult) -> Estimate | None:
    return bootstrap_estimate(_values(result, "e2el_ms"), _p(99))


def acceptance_length(result: BenchResult) -> Estimate | None:
    if result.server.spec_configured is False:
        return None  # no speculation: no acceptance to compare (shown as —)
    per_request = mean_estimate(_values(result, "acceptance_length"))
    value = result.spec_decode.acceptance_length
    if value is None:
        return per_request
    return Estimate(
        value, per_request.se if per_request else None, per_request.n if per_request else 0
    )


def _acceptance_rate(result: BenchResult) -> Estimate | None:
    v = result.spec_decode.acceptance_rate
    return None if v is None else Estimate(v * 100, None, 0)


METRICS: tuple[Metric, ...] = (
    Metric("output tok/s", "", True, output_throughput),
    Metric("request tok/s (mean)", "", True, _mean_of("output_tok_s")),
    Metric("TTFT mean", "ms", False, _mean_of("ttft_ms")),
    Metric("TPOT mean", "ms", False, _mean_of("tpot_ms")),
    Metric("ITL mean (per chunk)", "ms", None, _mean_of("itl_mean_ms")),
    Metric("E2EL mean", "ms", False, _mean_of("e2el_ms")),
    Metric("E2EL p95", "ms", False, e2el_p95),
    Metric("E2EL p99", "ms", False, e2el_p99),
    Metric("acceptance length", "", True, acceptance_length),
    Metric("draft acceptance", "%", True, _acceptance_rate),
)


@dataclass(frozen=True, slots=True)
class Cell:
    estimate: Estimate | None
    ratio: float | None = None
    """This run's value / run A's."""
    beyond_noise: bool | None = None
    """True: the difference to A is larger than the noise; None: noise unknown (or this is A)."""
    better: bool | None = None


@dataclass(frozen=True, slots=True)
class Row:
    metric: Metric
    cells: tuple[Cell, ...]


def compare(results: Sequence[BenchResult]) -> list[Row]:
    """One row per metric; cell i is run i against run 0."""
    rows: list[Row] = []
    for m in METRICS:
        estimates = [m.estimate(r) for r in results]
        base = estimates[0]
        cells = [Cell(base)]
        for est in estimates[1:]:
            if est is None or base is None:
                cells.append(Cell(est))
                continue
            beyond = differs(base, est)
            better = None
            if est.value != base.value and m.higher_is_better is not None:
                better = (est.value > base.value) == m.higher_is_better
            cells.append(Cell(est, ratio(base.value, est.value), beyond, better))
        rows.append(Row(m, tuple(cells)))
    return rows


def verdict(cell: Cell) -> str:
    """'better' / 'worse' / 'differs' (beyond noise), 'within noise', or '' (noise unknown)."""
    if cell.ratio is None or cell.beyond_noise is None:
        return ""
    if not cell.beyond_noise:
        return "within noise"
    if cell.better is None:
        return "differs"
    return "better" if cell.better else "worse"


def run_name(result: BenchResult, index: int, path: str | None = None) -> str:
    letter = chr(ord("A") + index) if index < 26 else f"#{index + 1}"
    label = result.label or (
        f"n={result.server.n_spec}" if result.server.n_spec is not None else None
    )
    return (
        f"{letter}" + (f" ({label})" if label else "") + (f" {path}" if path and not label else "")
    )


WORKLOAD_FIELDS: tuple[tuple[str, str], ...] = (
    ("dataset", "dataset"),
    ("input_len", "input"),
    ("output_len", "output"),
    ("ignore_eos", "ignore_eos"),
    ("concurrency", "concurrency"),
    ("request_rate", "rate"),
    ("temperature", "temperature"),
)
"""What a run's numbers depend on besides the server: prompt and answer lengths decide TTFT and
E2EL, concurrency and rate decide throughput and latency, dataset and temperature decide
acceptance. Two runs that differ here measured different workloads."""


def workload_differences(results: Sequence[BenchResult], names: Sequence[str]) -> list[str]:
    """One line per run whose workload differs from run A's, naming the differences; empty when
    every run measured A's workload."""
    base = results[0].config
    lines: list[str] = []
    for result, name in zip(results[1:], names[1:], strict=True):
        diffs = [
            f"{label} {getattr(base, field)!s} vs {getattr(result.config, field)!s}"
            for field, label in WORKLOAD_FIELDS
            if getattr(base, field) != getattr(result.config, field)
        ]
        if diffs:
            lines.append(f"{name} measured another workload than A: {', '.join(diffs)}")
    return lines
