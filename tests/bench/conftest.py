"""Fixtures for bench tests: a `vllm` executable that serves the simulator (host mode)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).with_name("fake_vllm_sim.py")


@pytest.fixture
def sim_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable `vllm` running fake_vllm_sim.py; starts are logged to tmp_path/starts and
    pids to tmp_path/pids."""
    monkeypatch.setenv("FAKE_SWEEP_LOG", str(tmp_path / "starts"))
    monkeypatch.setenv("FAKE_SWEEP_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe
