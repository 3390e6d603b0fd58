"""Fixtures for host-mode tests: the fake `vllm` executable (tests/support/fake_vllm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.host_mode import make_fake_vllm


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake `vllm`; its processes write their pids to tmp_path/pids."""
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return make_fake_vllm(tmp_path)
