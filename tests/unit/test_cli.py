from __future__ import annotations

import subprocess
import sys

from specmon import __version__
from specmon.cli.main import main


def test_version_flag_prints_version(capsys) -> None:
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"specmon {__version__}"


def test_python_dash_m_runs_the_same_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "specmon", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert "usage: specmon" in result.stdout
