"""Helpers for host-mode tests (pids written by the fake vllm, liveness from /proc, a tmux
terminal)."""

from __future__ import annotations

from pathlib import Path

from tests import terminal
from tests.terminal import TMUX as TMUX  # the host tests' skip conditions

WAIT_LIMIT_S = 120.0
"""Upper bound on waiting for the screen to show something: a failure bound, not a speed target."""


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


class Terminal(terminal.Terminal):
    """The shared tmux terminal, 160 columns wide, waiting up to WAIT_LIMIT_S (a hosted server's
    start is slower than the simulator's)."""

    def __init__(self, command: str, exit_file: Path, env: dict[str, str]) -> None:
        super().__init__(command, exit_file, env, width=160, wait_limit_s=WAIT_LIMIT_S)
