"""vLLM's per-request speculative-decoding object, `metrics.speculative_decoding`.

A server started with `--per-request-spec-decode-metrics summary|detailed` counts, per request,
every verify step: how many drafts it proposed and how many of them were accepted. The response
carries the result (reference §3.3): streamed, only on the final usage chunk; not streamed, under
the top-level `metrics`. `detailed` adds the per-step arrays. This module builds the same object
from the same observations, key for key, in the order vLLM's `RequestSpecDecodeMetrics.to_dict`
writes them. Pure: no I/O.

Reconciliation (what vLLM documents and the simulator keeps): summed over requests,
`num_spec_steps`, `num_draft_tokens` and `num_accepted_draft_tokens` equal the deltas of
`vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total` and
`..._num_accepted_tokens_total`, because both are fed by the same step observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

SpecMetricsLevel = Literal["none", "summary", "detailed"]
LEVELS: tuple[str, ...] = get_args(SpecMetricsLevel)
"""The values of `--per-request-spec-decode-metrics`; vLLM's default is "none"."""

PER_STEP_KEYS = ("per_step_accepted", "per_step_drafted")


def check_level(value: str) -> SpecMetricsLevel:
    """The level named by `value`, or ValueError naming the choices (vLLM's parser refuses any
    other value the same way)."""
    if value == "none":
        return "none"
    if value == "summary":
        return "summary"
    if value == "detailed":
        return "detailed"
    raise ValueError(
        f"per-request spec decode metrics must be one of {', '.join(LEVELS)}, got {value!r}"
    )


@dataclass(slots=True)
class RequestSpecMetrics:
    """The verify steps of one request, as vLLM's scheduler observes them."""

    num_spec_tokens: int
    detailed: bool
    histogram: list[int] = field(default_factory=list)
    """Index j = number of steps that accepted exactly j drafts (K + 1 entries)."""
    num_draft_tokens: int = 0
    per_step_accepted: list[int] = field(default_factory=list)
    per_step_drafted: list[int] = field(default_factory=list)

    @classmethod
    def new(cls, num_spec_tokens: int, level: SpecMetricsLevel) -> RequestSpecMetrics | None:
        """The accumulator for one request, or None when the level is "none"."""
        if level == "none":
            return None
        return cls(num_spec_tokens, level == "detailed", [0] * (num_spec_tokens + 1))

    def observe(self, draft_tokens: int, accepted: int) -> None:
        """One verify step that proposed `draft_tokens` drafts and accepted `accepted`."""
        self.histogram[accepted] += 1
        self.num_draft_tokens += draft_tokens
        if self.detailed:
            self.per_step_accepted.append(accepted)
            self.per_step_drafted.append(draft_tokens)

    def to_dict(self) -> dict[str, Any]:
        """The object, computed from the counts as vLLM computes it: mean acceptance length
        1 + accepted / steps (1.0 with no step), draft acceptance rate accepted / drafted (0.0
        with no draft). The per-step arrays appear only when some step was recorded at the
        detailed level."""
        steps = sum(self.histogram)
        accepted = sum(j * count for j, count in enumerate(self.histogram))
        result: dict[str, Any] = {
            "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / self.num_draft_tokens
            if self.num_draft_tokens
            else 0.0,
            "acceptance_histogram": list(self.histogram),
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": self.num_draft_tokens,
            "num_spec_tokens": self.num_spec_tokens,
        }
        if self.per_step_accepted:
            result["per_step_accepted"] = list(self.per_step_accepted)
            result["per_step_drafted"] = list(self.per_step_drafted)
        return result
