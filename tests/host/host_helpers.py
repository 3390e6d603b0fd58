"""Helpers for host-mode tests (pids written by the fake vllm, liveness from /proc)."""

from __future__ import annotations

from pathlib import Path


def recorded_pids(tmp_path: Path) -> list[int]:
    path = tmp_path / "pids"
    if not path.exists():
        return []
    return [int(p) for p in path.read_text().split()]


def alive(pid: int) -> bool:
    """True while `pid` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"
