"""Suite-wide settings."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Real `vllm serve` fixtures (vllm_draft_same, vllm_ngram, ...) for every test folder.
pytest_plugins = ["tests.real_vllm.fixtures"]

# Shared, noisy machines: no per-example deadline (timing is never what a property tests). CI runs
# derandomized, so a run is repeatable; local runs explore new examples each time.
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """No test reads or writes the user's own specmon data or config (stored baselines, ...).
    XDG_CACHE_HOME is left alone: the real-vLLM environment is cached there on purpose."""
    root = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
