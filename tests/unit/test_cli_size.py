"""The command line stays command-line work: what a command runs from its plan lives below it
(docs/architecture.md, the cli layer), so cli/ stays small enough to read in one sitting."""

from __future__ import annotations

from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "specmon" / "cli"
MAX_CLI_LINES = 3600


def test_cli_stays_under_its_line_budget() -> None:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in CLI.glob("*.py"))
    assert lines < MAX_CLI_LINES, (
        f"cli/ has {lines} lines (budget {MAX_CLI_LINES}): move what is not argument parsing "
        "or plan building below it (docs/architecture.md)"
    )
