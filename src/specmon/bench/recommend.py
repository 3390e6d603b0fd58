"""Sweep aggregation and the recommendation (pure).

Per sweep cell (n_spec, concurrency) the repeats are folded into estimates: the value is the mean
over the repeats and its noise the standard error over them (sd/sqrt(repeats)). With a single
repeat the noise comes from within the run instead (per-request spread; a bootstrap for p95).

The recommendation, per concurrency:
- by mean throughput: the highest mean output tok/s; every point whose difference to it is within
  the noise (stats.differs) or under TIE_FLOOR (1%) of it ties with it, and the smallest n_spec
  among the tied wins (fewer draft tokens: less verify work and memory for the same speed);
- by p95 latency: the lowest p95 E2EL, ties the same way.
It says when the two choices differ. With several concurrencies it builds a
`num_speculative_tokens_per_batch_size` schedule ([bs_start, bs_end, k] ranges, vLLM's dynamic
speculative decoding) from the throughput choice at each measured concurrency.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specmon.bench.compare import e2el_p95, output_throughput
from specmon.bench.result import BenchResult
from specmon.bench.stats import Estimate, differs, mean_estimate


@dataclass(frozen=True, slots=True)
class CellStats:
    """One (n_spec, concurrency) cell of a sweep, over its repeats."""

    n_spec: int
    concurrency: int
    repeats: int
    tok_s: Estimate | None
    """Mean output tok/s (run throughput), spread over repeats."""
    max_tok_s: float | None
    """The fastest single request seen."""
    e2el_mean_ms: Estimate | None
    e2el_p95_ms: Estimate | None
    acceptance_length: Estimate | None
    acceptance_rate: Estimate | None
    vanilla_requests: int = 0
    """Requests flagged at vanilla speed, those of a server without speculation not counted."""
    failed_requests: int = 0
    speedup: float | None = None
    """tok/s against the n_spec=0 cell of the same concurrency (and serve settings)."""
    serve: tuple[tuple[str, str], ...] = ()
    """The serve-grid values of the cell's server ((name, value), ...); () without a grid."""


def _over_repeats(
    runs: Sequence[BenchResult],
    value: Callable[[BenchResult], float | None],
    single: Callable[[BenchResult], Estimate | None],
) -> Estimate | None:
    values = [v for v in (value(r) for r in runs) if v is not None and math.isfinite(v)]
    if not values:
        return None
    if len(values) == 1:
        one = single(runs[0]) if len(runs) == 1 else None
        return one if one is not None else Estimate(values[0], None, 1)
    return mean_estimate(values)


def cell_stats(
    n_spec: int,
    concurrency: int,
    runs: Sequence[BenchResult],
    serve: tuple[tuple[str, str], ...] = (),
) -> CellStats:
    maxes = [r.summary.request_output_tok_s.max for r in runs]
    rates = [r.spec_decode.acceptance_rate for r in runs]
    rate_values = [x * 100 for x in rates if x is not None]
    return CellStats(
        n_spec=n_spec,
        concurrency=concurrency,
        repeats=len(runs),
        tok_s=_over_repeats(runs, lambda r: r.summary.output_throughput, output_throughput),
        max_tok_s=max((m for m in maxes if m is not None), default=None),
        e2el_mean_ms=_over_repeats(
            runs,
            lambda r: r.summary.e2el_ms.mean,
            lambda r: mean_estimate([x.e2el_ms for x in r.requests if x.e2el_ms is not None]),
        ),
        e2el_p95_ms=_over_repeats(runs, lambda r: r.summary.e2el_ms.p95, e2el_p95),
        acceptance_length=_over_repeats(
            runs,
            lambda r: r.spec_decode.acceptance_length,
            lambda r: None,
        ),
        acceptance_rate=mean_estimate(rate_values) if rate_values else None,
        vanilla_requests=sum(
            1
            for r in runs
            for x in r.requests
            if x.vanilla and "spec_not_configured" not in (c for c, _ in x.vanilla_reasons)
        ),
        failed_requests=sum(r.summary.failed for r in runs),
        serve=serve,
    )


def with_speedups(cells: Sequence[CellStats]) -> list[CellStats]:
    """Each cell with its speedup against n_spec=0 at the same concurrency and serve settings
    (None without one)."""
    base = {
        (c.serve, c.concurrency): c.tok_s.value
        for c in cells
        if c.n_spec == 0 and c.tok_s is not None
    }
    out = []
    for c in cells:
        b = base.get((c.serve, c.concurrency))
        speedup = c.tok_s.value / b if b and c.tok_s is not None else None
        out.append(
            CellStats(
                **{
                    **{f: getattr(c, f) for f in CellStats.__dataclass_fields__},
                    "speedup": speedup,
                }
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Choice:
    """The pick by one criterion at one concurrency."""

    n_spec: int
    best_n_spec: int
    """The point with the best value itself (differs from n_spec when a smaller one tied)."""
    value: float
    """The chosen point's value."""
    best_value: float
    tied: tuple[int, ...] = ()
    """Other points within the noise of the best."""
    noise_known: bool = True


TIE_FLOOR = 0.01
"""Differences under 1% of the best value are ties whatever the measured noise: run-to-run drift
(thermals, other load) that a few repeats cannot show is at least that large."""


def choose(
    cells: Sequence[CellStats],
    metric: Callable[[CellStats], Estimate | None],
    higher: bool,
    *,
    tie_floor: float = TIE_FLOOR,
) -> Choice | None:
    """The best cell by `metric`, preferring the smallest n_spec among those tied with it."""
    scored = [(c, metric(c)) for c in cells]
    scored_ok = [(c, e) for c, e in scored if e is not None]
    if not scored_ok:
        return None
    best_cell, best = max(scored_ok, key=lambda ce: ce[1].value if higher else -ce[1].value)
    tied = []
    noise_known = True
    for c, e in scored_ok:
        if c is best_cell:
            continue
        d = differs(best, e)
        if abs(e.value - best.value) <= tie_floor * abs(best.value):
            d = False
        if d is None:
            noise_known = False
            if e.value == best.value:
                tied.append(c.n_spec)
        elif not d:
            tied.append(c.n_spec)
    pick = min([best_cell.n_spec, *tied])
    picked = next(e for c, e in scored_ok if c.n_spec == pick)
    return Choice(
        n_spec=pick,
        best_n_spec=best_cell.n_spec,
        value=picked.value,
        best_value=best.value,
        tied=tuple(sorted(tied)),
        noise_known=noise_known,
    )


@dataclass(frozen=True, slots=True)
class Recommendation:
    concurrency: int
    by_throughput: Choice | None
    by_p95: Choice | None
    serve: tuple[tuple[str, str], ...] = ()
    """The serve-grid values this recommendation is for (a grid gets one per combination)."""

    @property
    def differ(self) -> bool:
        return (
            self.by_throughput is not None
            and self.by_p95 is not None
            and self.by_throughput.n_spec != self.by_p95.n_spec
        )


def recommend(cells: Sequence[CellStats]) -> list[Recommendation]:
    """One recommendation per serve-grid combination (in the order first seen) and concurrency
    (increasing): n_spec is chosen among the cells that share both."""
    out = []
    combos: list[tuple[tuple[str, str], ...]] = []
    for c in cells:
        if c.serve not in combos:
            combos.append(c.serve)
    for serve in combos:
        for conc in sorted({c.concurrency for c in cells if c.serve == serve}):
            mine = [c for c in cells if c.concurrency == conc and c.serve == serve]
            out.append(
                Recommendation(
                    conc,
                    choose(mine, lambda c: c.tok_s, higher=True),
                    choose(mine, lambda c: c.e2el_p95_ms, higher=False),
                    serve,
                )
            )
    return out


def batch_size_schedule(recs: Sequence[Recommendation]) -> list[list[int]] | None:
    """[[bs_start, bs_end, k], ...] from the throughput choice at each measured concurrency:
    concurrency c_i covers batch sizes c_{i-1}+1 .. c_i (the first starts at 1). None with fewer
    than two concurrencies."""
    picks = [(r.concurrency, r.by_throughput.n_spec) for r in recs if r.by_throughput is not None]
    if len(picks) < 2:
        return None
    schedule: list[list[int]] = []
    start = 1
    for conc, k in picks:
        if schedule and schedule[-1][2] == k:
            schedule[-1][1] = conc  # merge equal neighbours
        else:
            schedule.append([start, conc, k])
        start = conc + 1
    return schedule


@dataclass(frozen=True, slots=True)
class ServeIdentity:
    """What is known to write the `vllm serve` line (None → a placeholder)."""

    model: str | None = None
    draft_model: str | None = None
    method: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    """More speculative-config keys (ngram's prompt_lookup_min/max, options)."""
    serve_args: tuple[str, ...] = ()
    """Extra `vllm serve` arguments the sweep's servers ran with (host mode)."""


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def serve_command(
    identity: ServeIdentity,
    n_spec: int,
    schedule: list[list[int]] | None = None,
    serve_args: Sequence[str] = (),
) -> str:
    """The `vllm serve` command line of a setting (placeholders for what is not known);
    `serve_args` (the serve-grid values, `--max-num-batched-tokens 8192`) follow the model."""
    model = identity.model or "<MODEL>"
    from specmon.sources.host.spec import merge_args

    model_text = (_shell_quote(model) if " " in model else model) + "".join(
        " " + (_shell_quote(a) if not a or any(ch.isspace() or ch in "'\"$`{}" for ch in a) else a)
        for a in merge_args(identity.serve_args, serve_args)
    )
    if n_spec == 0 and not any(k for *_, k in schedule or []):
        # No speculation anywhere (vLLM refuses num_speculative_tokens 0): a plain server.
        return f"vllm serve {model_text}"
    spec: dict[str, object] = {"method": identity.method or "<METHOD>"}
    if identity.draft_model or identity.method is None:
        spec["model"] = identity.draft_model or "<DRAFT_MODEL>"
    spec |= {
        "num_speculative_tokens": max([n_spec, *(k for *_, k in schedule or [])]),
    }
    if schedule:
        spec["num_speculative_tokens_per_batch_size"] = schedule
    spec.update(identity.extra)
    quoted = _shell_quote(json.dumps(spec))
    return f"vllm serve {model_text} --speculative-config {quoted}"
