"""The vanilla baseline store: XDG path, keyed round trip, atomic writes, corrupt files kept."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from specmon.sources import baseline_store
from specmon.sources.baseline_store import (
    Baseline,
    BaselineKey,
    BaselineStore,
    BaselineStoreError,
    default_path,
)
from specmon.sources.canary_store import CanaryStore, CanaryStoreError

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


def _load_in_a_thread(store: BaselineStore | CanaryStore) -> BaseException | None:
    """What `store.load()` raised (None: nothing); a hang guard, not a timing: a FIFO read
    blocks for ever, so the thread is left behind (daemon) and the test fails instead."""
    caught: list[BaseException | None] = []

    def run() -> None:
        try:
            store.load()
            caught.append(None)
        except Exception as exc:  # the store's error is the result
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert caught, "load() blocked on a FIFO"
    return caught[0]


@pytest.mark.parametrize("store_kind", ["baselines", "canary"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_store_that_is_not_a_regular_file_is_one_line_and_never_waited_on(
    tmp_path, store_kind, kind
):
    path = tmp_path / "store.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    store = BaselineStore(path) if store_kind == "baselines" else CanaryStore(path)
    error = _load_in_a_thread(store)
    assert isinstance(error, BaselineStoreError | CanaryStoreError), error
    assert str(path) in str(error) and "not a regular file" in str(error)


def test_a_baseline_file_over_the_cap_or_nested_too_deep_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "baselines.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(BaselineStoreError, match="nested too deep"):
        BaselineStore(path).load()
    monkeypatch.setattr(baseline_store, "MAX_FILE_BYTES", 1000)
    with pytest.raises(BaselineStoreError, match="is over 0 MiB; it was left as it is"):
        BaselineStore(path).load()
    assert path.stat().st_size == 200_000  # left as it was
