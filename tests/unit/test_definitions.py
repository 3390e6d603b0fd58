"""One source of definitions (core/definitions.py): docs/definitions.md holds its glossary
verbatim, and every number the app shows has a definition.

Regenerate the glossary in the document: `python -m tests.unit.test_definitions --write`.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

from specmon.core.definitions import (
    BEGIN_MARK,
    DEFINITIONS,
    END_MARK,
    GROUPS,
    by_group,
    definition,
    definitions_markdown,
)
from specmon.core.detectors import vanilla

DOC = Path(__file__).resolve().parents[2] / "docs" / "definitions.md"


def _with_glossary(text: str) -> str:
    start = text.index(BEGIN_MARK)
    end = text.index(END_MARK) + len(END_MARK) + 1
    return text[:start] + definitions_markdown() + text[end:]


def test_docs_hold_the_generated_glossary_verbatim() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN_MARK) == 1 and text.count(END_MARK) == 1
    assert definitions_markdown() in text, (
        "docs/definitions.md is out of date: run `python -m tests.unit.test_definitions --write`"
    )
    for d in DEFINITIONS:
        assert d.short in text


def test_keys_unique_groups_known_texts_present() -> None:
    keys = [d.key for d in DEFINITIONS]
    assert len(keys) == len(set(keys))
    group_keys = {k for k, _ in GROUPS}
    for d in DEFINITIONS:
        assert d.group in group_keys, d.key
        assert d.name and d.short, d.key
        assert "\n" not in d.short + d.long
    assert sum(len(items) for _, items in by_group()) == len(DEFINITIONS)


def test_every_number_shown_is_defined() -> None:
    required = {
        "decode_tok_s",
        "e2e_tok_s",
        "ttft_s",
        "tpot_s",
        "itl_s",
        "e2el_s",
        "acceptance_length",
        "al_server",
        "al_chunks",
        "al_metrics",
        "draft_acceptance_rate",
        "per_position_rate",
        "window",
        "since_start",
        "vanilla_flag",
        "cycle_period",
        "cycle_phases",
        "share_degraded",
        "long_run_vs_peak",
        "gpu_temperature",
        "gpu_power",
        "gpu_sm_clock",
        "gpu_memory",
        "gpu_clock_events",
        "expected_tokens",
        "position_share",
        "trim_hint",
        "heat",
        "server_ttft_s",
        "ttft_outside_s",
        "canary_al",
        "canary_expected_al",
        "canary_tolerance",
        "canary_status",
        "canary_diagnosis",
    }
    for key in required:
        definition(key)  # KeyError names the missing one


def test_latencies_are_defined_in_ms_as_every_screen_shows_them() -> None:
    """The answer line, the latency lines, bench and F1 all speak of TTFT, TPOT, ITL and E2EL in
    ms: the definitions' unit says so too (not "TPOT (s)" beside "TPOT 12 ms")."""
    latencies = [d for d in DEFINITIONS if {"TTFT", "TPOT", "ITL", "E2EL"} & set(d.name.split())]
    assert len(latencies) >= 6
    assert {d.name: d.unit for d in latencies} == {d.name: "ms" for d in latencies}


def test_every_vanilla_reason_code_is_defined() -> None:
    # The codes the detector can give: its rule functions' names without the leading underscore.
    codes = {rule.__name__.lstrip("_") for rule in vanilla._REASONS} | {"vanilla_speed"}
    for code in codes:
        assert definition(code).name == code


def test_every_diagnosis_view_is_defined() -> None:
    # Each analysis of docs/diagnosis.md is explained by the help screen (F1).
    for key in (
        "al_by_context",
        "context_cliff",
        "thermal_attribution",
        "clock_fit",
        "power_limit_requested",
        "seconds_saved",
        "seconds_saved_reason",
        "quality_loop",
        "quality_garbled",
        "repeated_ngram_share",
        "al_z_score",
    ):
        assert definition(key).group == "diagnosis", key


def test_every_gpu_number_field_is_defined() -> None:
    from specmon.core.events import GpuReading

    covered = {
        "temperature_c": "gpu_temperature",
        "slowdown_temperature_c": "gpu_temperature",
        "power_w": "gpu_power",
        "power_limit_w": "gpu_power",
        "power_limit_requested_w": "power_limit_requested",
        "power_limit_default_w": "power_limit_requested",
        "sm_clock_mhz": "gpu_sm_clock",
        "memory_clock_mhz": "gpu_sm_clock",
        "memory_used_bytes": "gpu_memory",
        "memory_total_bytes": "gpu_memory",
        "utilization_pct": "gpu_utilization",
        "clock_event_reasons": "gpu_clock_events",
    }
    numbers = {f.name for f in fields(GpuReading)} - {"index", "name", "uuid", "host"}
    assert numbers == set(covered)
    for key in covered.values():
        definition(key)


if __name__ == "__main__" and "--write" in sys.argv:
    DOC.write_text(_with_glossary(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the glossary into {DOC.name}")
