"""Suite-wide settings."""

from __future__ import annotations

import os

from hypothesis import settings

# Real `vllm serve` fixtures (vllm_draft_same, vllm_ngram, ...) for every test folder.
pytest_plugins = ["tests.real_vllm.fixtures"]

# Shared, noisy machines: no per-example deadline (timing is never what a property tests). CI runs
# derandomized, so a run is repeatable; local runs explore new examples each time.
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
