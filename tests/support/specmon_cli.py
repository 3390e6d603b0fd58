"""The `specmon` command as a child process of a test: its environment and one run of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import specmon

SRC = str(Path(specmon.__file__).resolve().parents[1])
"""The source tree of the specmon under test (a child process imports it from there)."""


def specmon_env(**extra: str) -> dict[str, str]:
    """This process's environment with SRC first on PYTHONPATH, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_specmon(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`python -m specmon ARGS` to the end (no stdin), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "specmon", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=specmon_env(),
        stdin=subprocess.DEVNULL,
    )
