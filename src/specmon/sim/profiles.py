"""Hardware/model profiles of the simulated server: the step costs and acceptance that drive it.

A profile holds PARAMETERS of the step model (see `step_model`), never per-n answers: the
throughput at any `n_spec` follows from step costs and acceptance. The parameters were fitted once
to the figures users reported (the seeds: 256 prompt / 1024 output tokens, concurrency 1); the
tests in tests/sim/test_calibration.py check those figures on the model, analytically.

Acceptance is given as CONDITIONAL per-position rates: position i's draft token is accepted with
probability `accept_first * accept_decay**i` given that every earlier position was accepted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    """Everything the simulator needs to imitate one model on one GPU."""

    name: str
    description: str
    model: str
    """The served model name (also `root` in /v1/models)."""
    draft_model: str
    method: str
    gpu: str
    vllm_version: str
    """The vLLM version the simulator imitates for this profile (reported by /version)."""
    max_model_len: int
    default_n_spec: int
    target_step_s: float
    """One plain decode step of the target model (vanilla: one token per step)."""
    verify_per_draft: float
    """Extra verify cost per draft token, as a fraction of `target_step_s`."""
    verify_per_draft_sq: float
    """Quadratic verify term (memory-bandwidth saturation on deep drafts), fraction per token²."""
    draft_base_s: float
    """Cost of the drafter's forward pass (DFlash drafts a whole block in one pass)."""
    draft_per_token_s: float
    prefill_base_s: float
    prefill_per_token_s: float
    accept_first: float
    """Conditional acceptance of draft position 0."""
    accept_decay: float
    """Each further position's conditional acceptance is the previous one times this."""
    batch_contention: float = 0.15
    """Step time grows by this fraction for every other request running in the same batch."""


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="gemma4-26b-rtx5090m",
            description=(
                "Gemma 4 26B-A4B AWQ + z-lab DFlash on an RTX 5090 Laptop (24 GB): peak at n=8, "
                "vanilla ~64 tok/s"
            ),
            model="cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
            draft_model="z-lab/gemma-4-26B-A4B-it-DFlash",
            method="dflash",
            gpu="NVIDIA GeForce RTX 5090 Laptop GPU",
            vllm_version="0.20.2",
            max_model_len=8192,
            default_n_spec=8,
            target_step_s=0.014153,
            verify_per_draft=0.020773,
            verify_per_draft_sq=1.9e-05,
            draft_base_s=0.00016,
            draft_per_token_s=0.0000,
            prefill_base_s=0.030,
            prefill_per_token_s=0.00012,
            accept_first=0.7677,
            accept_decay=0.9824,
        ),
        Profile(
            name="gemma4-26b-rtx5090",
            description=(
                "Gemma 4 26B-A4B AWQ + z-lab DFlash on a desktop RTX 5090 (32 GB): vanilla "
                "228 tok/s, n=13 ~578 tok/s"
            ),
            model="cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
            draft_model="z-lab/gemma-4-26B-A4B-it-DFlash",
            method="dflash",
            gpu="NVIDIA GeForce RTX 5090",
            vllm_version="0.19.2rc1",
            max_model_len=2048,
            default_n_spec=13,
            target_step_s=0.00437,
            verify_per_draft=0.2199,
            verify_per_draft_sq=0.0,
            draft_base_s=0.00040,
            draft_per_token_s=0.00002,
            prefill_base_s=0.010,
            prefill_per_token_s=0.00005,
            accept_first=0.95,
            accept_decay=1.0,
        ),
        Profile(
            name="gemma4-26b-h100",
            description=(
                "Gemma 4 26B-A4B + z-lab DFlash on an H100 80 GB at n=15: AL ~7.8, ~222 tok/s "
                "(~3.4x vanilla)"
            ),
            model="google/gemma-4-26B-A4B-it",
            draft_model="z-lab/gemma-4-26B-A4B-it-DFlash",
            method="dflash",
            gpu="NVIDIA H100 80GB HBM3",
            vllm_version="0.19.2",
            max_model_len=32768,
            default_n_spec=15,
            target_step_s=0.015296,
            verify_per_draft=0.081958,
            verify_per_draft_sq=0.0,
            draft_base_s=0.00050,
            draft_per_token_s=0.00002,
            prefill_base_s=0.020,
            prefill_per_token_s=0.00006,
            accept_first=0.9427,
            accept_decay=0.985,
        ),
        Profile(
            name="gemma4-31b-spark",
            description=(
                "Gemma 4 31B (fp8) + RedHatAI DFlash speculator on a DGX Spark (GB10): vanilla "
                "5.5 tok/s, n=8 ~15.4 tok/s, draft acceptance ~29%"
            ),
            model="google/gemma-4-31B-it",
            draft_model="RedHatAI/gemma-4-31B-it-speculator.dflash",
            method="dflash",
            gpu="NVIDIA GB10",
            vllm_version="0.19.2rc1.dev21+g893611813",
            max_model_len=16384,
            default_n_spec=8,
            target_step_s=0.1816,
            verify_per_draft=0.018777,
            verify_per_draft_sq=0.0,
            draft_base_s=0.004,
            draft_per_token_s=0.0002,
            prefill_base_s=0.150,
            prefill_per_token_s=0.0010,
            accept_first=0.7912,
            accept_decay=0.93,
        ),
    )
}

DEFAULT_PROFILE = "gemma4-26b-rtx5090m"
"""The demo's profile: the seed that showed the 5 fast / 1 / 3 degraded / 1 cycle at n=8."""


def get_profile(name: str) -> Profile:
    """The profile called `name`; a ValueError naming the valid choices otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        choices = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown profile {name!r} (choose one of: {choices})") from None
