"""Fixtures for host-mode tests: a fake `vllm` executable (tests/host/fake_vllm.py)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).with_name("fake_vllm.py")


def make_fake_vllm(directory: Path) -> Path:
    """An executable named `vllm` whose `#!` line is this python, running fake_vllm.py."""
    exe = directory / "vllm"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake `vllm`; its processes write their pids to tmp_path/pids."""
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return make_fake_vllm(tmp_path)
