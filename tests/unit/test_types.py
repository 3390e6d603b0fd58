"""mypy --strict on the whole package is part of the suite, like ruff and the layer contracts: a
type error fails CI like a failing test (configuration in pyproject.toml, [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_is_clean_on_src() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "src/specmon"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
