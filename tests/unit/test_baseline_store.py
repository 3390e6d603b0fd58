"""The vanilla baseline store: XDG path, keyed round trip, atomic writes, corrupt files kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon.sources.baseline_store import (
    Baseline,
    BaselineKey,
    BaselineStore,
    BaselineStoreError,
    default_path,
)

GEMMA = Baseline("gemma-4-26B", "RTX 5090 Laptop", "0.20.2", 60.4, requests=5, recorded_at="t")


def test_default_path_follows_xdg(tmp_path):
    assert default_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "specmon" / "baselines.json"
    home_default = Path.home() / ".local" / "share" / "specmon" / "baselines.json"
    assert default_path({}) == home_default
    assert default_path({"XDG_DATA_HOME": "relative/dir"}) == home_default  # XDG: ignore relative


def test_round_trip_keyed_by_model_gpu_and_version(tmp_path):
    store = BaselineStore(tmp_path / "d" / "baselines.json")
    assert store.load() == []
    assert store.get(GEMMA.key) is None
    store.put(GEMMA)
    other = Baseline("gemma-4-26B", "RTX 5090 Laptop", "0.21.0", 58.0)
    store.put(other)
    assert store.get(GEMMA.key) == GEMMA
    assert store.get(BaselineKey("gemma-4-26B", "RTX 5090 Laptop", "0.21.0")).tok_s == 58.0
    assert store.get(BaselineKey("gemma-4-26B", "H100", "0.20.2")) is None
    store.put(Baseline("gemma-4-26B", "RTX 5090 Laptop", "0.20.2", 61.0))  # replaces its key
    assert store.get(GEMMA.key).tok_s == 61.0
    assert len(store.load()) == 2
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["baselines.json"]  # no temp left


def test_corrupt_file_is_reported_and_never_overwritten(tmp_path):
    path = tmp_path / "baselines.json"
    path.write_text(
        '{"format": "specmon-baselines", "version": 1, "baselines": [', encoding="utf-8"
    )
    store = BaselineStore(path)
    with pytest.raises(BaselineStoreError, match=r"not valid JSON \(line 1") as info:
        store.load()
    assert str(path) in str(info.value)
    with pytest.raises(BaselineStoreError):
        store.put(GEMMA)
    assert path.read_text(encoding="utf-8").endswith('"baselines": [')


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[1, 2]", "not a specmon baseline file"),
        ('{"format": "specmon-baselines", "version": 99}', "version 99"),
        ('{"format": "specmon-baselines", "version": 1, "baselines": [{"model": "m"}]}', "'tok_s'"),
        (
            '{"format": "specmon-baselines", "version": 1, "baselines": [{"tok_s": -3}]}',
            "positive",
        ),
        (
            '{"format": "specmon-baselines", "version": 1, "baselines": [{"tok_s": 5, "gpu": 3}]}',
            "gpu is not a string",
        ),
    ],
)
def test_wrong_content_gives_a_clear_message(tmp_path, content, words):
    path = tmp_path / "baselines.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineStoreError, match=words):
        BaselineStore(path).load()


def test_written_file_is_the_documented_format(tmp_path):
    path = tmp_path / "baselines.json"
    BaselineStore(path).put(GEMMA)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "specmon-baselines" and data["version"] == 1
    assert data["baselines"][0]["tok_s"] == 60.4


def test_non_positive_speed_is_refused(tmp_path):
    with pytest.raises(ValueError, match="positive"):
        BaselineStore(tmp_path / "b.json").put(Baseline("m", "g", "v", 0.0))
