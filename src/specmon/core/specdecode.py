"""Speculative-decoding numbers from /metrics counter deltas (summed over engines).

    acceptance length (AL)  = 1 + Δaccepted / Δdrafts          (includes the bonus token)
    draft acceptance rate   = Δaccepted / Δdraft_tokens          (0..1)
    per-position rate i     = Δaccepted_per_pos{position=i} / Δdrafts
    decode tok/s            = Δgeneration_tokens / Δt            (server-wide)

Every ratio is None when its denominator delta is 0 (no drafts in the window): never 1.0 or 0.
These are vLLM's own formulas (reference §1.2) and `vllm bench serve`'s (§4.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from specmon.core import families
from specmon.core.counters import CounterWindow, SeriesKey, sum_by_name
from specmon.core.events import MetricSample


@dataclass(frozen=True, slots=True)
class SpecDecodeStats:
    """Spec-decode numbers over one window of counter deltas."""

    drafts: float | None
    draft_tokens: float | None
    accepted: float | None
    acceptance_length: float | None
    draft_acceptance_rate: float | None
    per_position_rates: tuple[float, ...] | None
    """Index i = position i; None when there are no per-position series or no drafts."""


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _position(labels: Iterable[tuple[str, str]]) -> int | None:
    for k, v in labels:
        if k == "position":
            try:
                return int(v)
            except ValueError:
                return None
    return None


def per_position_deltas(deltas: Mapping[SeriesKey, float]) -> dict[int, float]:
    """Δaccepted_per_pos summed over engines, by position."""
    out: dict[int, float] = {}
    for (name, labels), v in deltas.items():
        if name != families.SPEC_ACCEPTED_PER_POS:
            continue
        pos = _position(labels)
        if pos is not None and pos >= 0:
            out[pos] = out.get(pos, 0.0) + v
    return out


def spec_decode_stats(deltas: Mapping[SeriesKey, float]) -> SpecDecodeStats:
    """AL, draft acceptance rate and per-position rates from counter deltas of one window."""
    drafts = sum_by_name(deltas, families.SPEC_DRAFTS)
    draft_tokens = sum_by_name(deltas, families.SPEC_DRAFT_TOKENS)
    accepted = sum_by_name(deltas, families.SPEC_ACCEPTED)
    ratio = _ratio(accepted, drafts)
    al = None if ratio is None else 1.0 + ratio
    per_pos = per_position_deltas(deltas)
    rates: tuple[float, ...] | None = None
    if per_pos and drafts is not None and drafts > 0:
        k = max(per_pos) + 1
        rates = tuple(per_pos.get(i, 0.0) / drafts for i in range(k))
    return SpecDecodeStats(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        acceptance_length=al,
        draft_acceptance_rate=_ratio(accepted, draft_tokens),
        per_position_rates=rates,
    )


def decode_tokens_per_second(window: CounterWindow | None) -> float | None:
    """Server-wide decode tok/s = Δgeneration_tokens / Δt (None without a window or time)."""
    return None if window is None else window.rate(families.GENERATION_TOKENS)


def spec_configured(samples: Iterable[MetricSample]) -> bool:
    """True when the page has any `vllm:spec_decode_*` family (vLLM registers them only with
    `--speculative-config`); False when it has none."""
    return any(s.name.startswith(families.SPEC_PREFIX) for s in samples)


def n_spec_of(samples: Iterable[MetricSample]) -> int | None:
    """K (num_speculative_tokens) = the number of distinct `position` labels of the per-position
    counter; None when that family is absent."""
    positions = {_position(s.labels) for s in samples if s.name == families.SPEC_ACCEPTED_PER_POS}
    positions.discard(None)
    return len(positions) if positions else None


def gauge_sum(samples: Iterable[MetricSample], name: str) -> float | None:
    """A gauge summed over engines (running, waiting); None when absent."""
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else None


def gauge_max(samples: Iterable[MetricSample], name: str) -> float | None:
    """A gauge's largest value over engines (KV usage, a 0..1 fraction); None when absent."""
    values = [s.value for s in samples if s.name == name]
    return max(values) if values else None
