"""The labelled verdict corpus (tests/verdict_corpus/) scored against its ground truth, and the
issue's targets on it (benchmarks/verdicts.py; docs/diagnosis.md, "Scored against ground truth").

The targets are the acceptance bar of the verdict rules: this test fails until every verdict
meets them on the whole corpus (tuning and held-out scenarios together)."""

from __future__ import annotations

import gzip
import json

import pytest
from benchmarks import verdicts
from benchmarks.verdicts import CORPUS, load_manifest, score_corpus, target_failures

REQUIRED = {
    "healthy",
    "cycle",
    "cycle-loops",
    "nocycle-loops-garbles",
    "cycle-garbles",
    "thermal-cycle",
    "context-cycle",
    "uptime-drift",
    "restart",
    "two-clients",
    "canary-degraded-start",
    "mid-answer",
    "chat-overflow",
}
"""The mixes the corpus must hold."""


@pytest.fixture(scope="module")
def scores() -> list[verdicts.ScenarioScore]:
    return score_corpus(CORPUS)


def test_the_corpus_holds_the_required_mixes_split_in_two() -> None:
    manifest = load_manifest(CORPUS)
    names = {s["name"] for s in manifest}
    assert len(manifest) >= 15
    assert names >= REQUIRED
    splits = {s["split"] for s in manifest}
    assert splits == {"tuning", "held-out"}
    for entry in manifest:
        recording = CORPUS / entry["recording"]
        assert recording.stat().st_size < 200_000, entry["name"]
        with gzip.open(recording, "rt", encoding="utf-8") as f:
            header = json.loads(f.readline())
        assert header["format"] == "specmon-session"
        real = entry["name"].startswith("real-")  # a real vLLM, truth by construction
        assert header["simulated"] is not real, entry["name"]


def test_every_recorded_answer_has_its_truth(scores: list[verdicts.ScenarioScore]) -> None:
    for s in scores:
        # a real GPU run's scenario holds what its bench runs served (docs/gpu.md)
        assert s.answers >= (4 if s.name.startswith("real-gpu-") else 10), s.name
        assert s.unmatched == 0, s.name
    by_name = {s.name: s for s in scores}
    assert "canary" in by_name["canary-degraded-start"].sessions
    assert by_name["nocycle-loops-garbles"].requests["garbled"].positives >= 3
    assert by_name["cycle-loops"].requests["loop"].positives >= 8


def test_the_verdicts_meet_the_targets_on_the_corpus(
    scores: list[verdicts.ScenarioScore],
) -> None:
    missed = target_failures(scores)
    assert not missed, "targets missed:\n" + "\n".join(missed)
