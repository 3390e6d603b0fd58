"""The layer arrows of DESIGN.md are enforced by import-linter contracts in pyproject.toml."""

from __future__ import annotations

import os
from pathlib import Path

from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold(capsys) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        os.chdir(cwd)
    report = capsys.readouterr().out
    assert status == EXIT_STATUS_SUCCESS, report
    assert "0 broken" in report
