"""The speculative-decoding step model: pure functions of a profile (no I/O, no clock).

One engine step of one request, with K = n_spec draft tokens:
- cost = draft pass + verify pass. The drafter (DFlash) proposes all K tokens in one pass:
  `draft_base_s + draft_per_token_s * K`. The target verifies K+1 positions:
  `target_step_s * (1 + verify_per_draft * K + verify_per_draft_sq * K**2)`. With K = 0 a step is
  one plain target step. Other requests in the batch stretch the step by `batch_contention` each.
- yield = accepted + 1 tokens (the bonus token). Draft position i is accepted with the CONDITIONAL
  probability `p_i` given that positions 0..i-1 were all accepted; the first rejection ends the
  step. The CUMULATIVE rate `c_i = p_0 * ... * p_i` is the probability that positions 0..i were
  all accepted; it is what vLLM's per-position counter measures
  (`accepted_per_pos[i] / drafts`), and expected acceptance length is `AL = 1 + sum(c_i)`.
- a request's first token comes from the prefill (`prefill_base_s + prefill_per_token_s * P`),
  without drafts, as in vLLM; then decode steps until `max_tokens`.

Throughput is not stored anywhere: it follows from these costs and acceptance, exactly (the
expected number of steps is computed by dynamic programming over the tokens left).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from specmon.sim.profiles import Profile

PHASES = {"f": "fast", "t": "transition", "d": "degraded", "r": "recovery"}
"""Per-request phases of a schedule (see `phase_acceptance_scale`)."""

TRANSITION_SPEED = 0.5
"""A transition request runs at about half the fast speed (the seed: 103 against ~220 tok/s)."""
RECOVERY_SPEED = 0.95
"""A recovery request is nearly back to fast speed (the seed: 212 against ~222 tok/s)."""


def conditional_acceptance(profile: Profile, n_spec: int, scale: float = 1.0) -> tuple[float, ...]:
    """Per-position conditional acceptance p_0..p_{K-1}, each multiplied by `scale` (0..1)."""
    if n_spec < 0:
        raise ValueError(f"n_spec must be >= 0, got {n_spec}")
    rates = []
    for i in range(n_spec):
        p = profile.accept_first * profile.accept_decay**i * scale
        rates.append(min(1.0, max(0.0, p)))
    return tuple(rates)


def cumulative_acceptance(conditional: Sequence[float]) -> tuple[float, ...]:
    """c_i = p_0 * ... * p_i: the share of drafts whose first i+1 tokens were all accepted."""
    out = []
    c = 1.0
    for p in conditional:
        c *= p
        out.append(c)
    return tuple(out)


def expected_acceptance_length(conditional: Sequence[float]) -> float:
    """AL = 1 + sum of the cumulative per-position rates (tokens per step, bonus included)."""
    return 1.0 + sum(cumulative_acceptance(conditional))


def accepted_distribution(conditional: Sequence[float]) -> tuple[float, ...]:
    """P(accepted = j) for j = 0..K."""
    k = len(conditional)
    cum = (1.0, *cumulative_acceptance(conditional))
    probs = []
    for j in range(k):
        probs.append(cum[j] * (1.0 - conditional[j]))
    probs.append(cum[k])
    return tuple(probs)


def draw_accepted(conditional: Sequence[float], rng: random.Random) -> int:
    """Draw one step's accepted draft tokens: accept positions in order until the first miss."""
    accepted = 0
    for p in conditional:
        if rng.random() >= p:
            break
        accepted += 1
    return accepted


def contention_factor(profile: Profile, batch: int) -> float:
    """How much longer a step takes while `batch` requests share it (1.0 when alone)."""
    return 1.0 + profile.batch_contention * max(0, batch - 1)


def step_time(profile: Profile, n_spec: int, batch: int = 1) -> float:
    """Seconds one engine step takes with `n_spec` drafts while `batch` requests run."""
    k = n_spec
    verify = profile.target_step_s * (
        1.0 + profile.verify_per_draft * k + profile.verify_per_draft_sq * k * k
    )
    draft = profile.draft_base_s + profile.draft_per_token_s * k if k > 0 else 0.0
    return (verify + draft) * contention_factor(profile, batch)


def prefill_time(profile: Profile, prompt_tokens: int) -> float:
    """Seconds from scheduling to the first token for a prompt of `prompt_tokens`."""
    return profile.prefill_base_s + profile.prefill_per_token_s * max(0, prompt_tokens)


def expected_decode_steps(conditional: Sequence[float], tokens: int) -> float:
    """Expected engine steps to emit `tokens` tokens (each step emits accepted+1, capped at the
    tokens still to go), exactly, by dynamic programming over the tokens left."""
    return _expected_steps(tuple(conditional), tokens)


@lru_cache(maxsize=256)
def _expected_steps(conditional: tuple[float, ...], tokens: int) -> float:
    probs = accepted_distribution(conditional)
    expected = [0.0] * (tokens + 1)
    for left in range(1, tokens + 1):
        total = 1.0
        for accepted, p in enumerate(probs):
            rest = left - (accepted + 1)
            if rest > 0:
                total += p * expected[rest]
        expected[left] = total
    return expected[tokens]


def expected_request_time(
    profile: Profile,
    n_spec: int,
    prompt_tokens: int,
    output_tokens: int,
    scale: float = 1.0,
) -> float:
    """Expected seconds for one request alone on the server (prefill + decode steps)."""
    if output_tokens <= 0:
        return prefill_time(profile, prompt_tokens)
    cond = conditional_acceptance(profile, n_spec, scale)
    steps = expected_decode_steps(cond, output_tokens - 1)
    return prefill_time(profile, prompt_tokens) + steps * step_time(profile, n_spec)


def expected_output_throughput(
    profile: Profile,
    n_spec: int,
    prompt_tokens: int = 256,
    output_tokens: int = 1024,
    scale: float = 1.0,
) -> float:
    """Output tok/s of one request at concurrency 1, as `vllm bench serve` reports it
    (output tokens / end-to-end time)."""
    return output_tokens / expected_request_time(
        profile, n_spec, prompt_tokens, output_tokens, scale
    )


def phase_acceptance_scale(profile: Profile, n_spec: int, phase: str) -> float:
    """The factor on every conditional acceptance rate that a schedule phase applies.

    f (fast) = 1; d (degraded) = 0: drafts are still proposed and verified but none accepted
    (AL 1.0, a little below vanilla speed because the verify pass still costs); t (transition)
    and r (recovery) are solved so the request runs at TRANSITION_SPEED / RECOVERY_SPEED of the
    fast acceptance length, i.e. of the fast speed at the same step cost.
    """
    if phase == "f" or n_spec == 0:
        return 1.0
    if phase == "d":
        return 0.0
    if phase == "t":
        fraction = TRANSITION_SPEED
    elif phase == "r":
        fraction = RECOVERY_SPEED
    else:
        raise ValueError(f"unknown phase {phase!r} (choose one of: {', '.join(PHASES)})")
    fast_al = expected_acceptance_length(conditional_acceptance(profile, n_spec))
    target = max(1.0, fast_al * fraction)
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        if expected_acceptance_length(conditional_acceptance(profile, n_spec, mid)) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@dataclass(frozen=True, slots=True)
class Step:
    """One engine step of one request: what it cost and what it emitted."""

    duration: float
    """Model seconds (before --speed)."""
    tokens: int
    """Tokens emitted to the client by this step."""
    drafts: int
    """1 when this step verified drafts (vLLM's num_drafts), else 0."""
    draft_tokens: int
    accepted: int
    prefill: bool = False


def request_steps(
    profile: Profile,
    n_spec: int,
    prompt_tokens: int,
    max_tokens: int,
    rng: random.Random,
    scale: float = 1.0,
    scale_at: Callable[[int], float] | None = None,
) -> Iterator[Step]:
    """The steps of one request: the prefill (first token), then decode steps to `max_tokens`.

    On the last step the emitted tokens are capped at what is left, and `accepted` is counted as
    emitted - 1, so that over a request generation tokens = first token + drafts + accepted,
    as in vLLM's counters. Durations are for a request alone; the server stretches them with
    `contention_factor` by the batch it runs in. `scale_at(emitted)`, when given, multiplies
    the acceptance scale of the step that follows `emitted` tokens (a drift with context length
    or uptime, sim.drift).
    """
    if max_tokens <= 0:
        return
    yield Step(prefill_time(profile, prompt_tokens), 1, 0, 0, 0, prefill=True)
    cond = conditional_acceptance(profile, n_spec, scale)
    left = max_tokens - 1
    duration = step_time(profile, n_spec)
    while left > 0:
        if scale_at is not None and n_spec > 0:
            cond = conditional_acceptance(profile, n_spec, scale * scale_at(max_tokens - left))
        accepted = draw_accepted(cond, rng) if n_spec > 0 else 0
        tokens = min(accepted + 1, left)
        left -= tokens
        if n_spec > 0:
            yield Step(duration, tokens, 1, n_spec, tokens - 1)
        else:
            yield Step(duration, tokens, 0, 0, 0)
