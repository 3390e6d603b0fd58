"""Helpers for host-mode tests (pids written by the fake vllm, liveness from /proc, a tmux
terminal)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

TMUX = shutil.which("tmux")
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


class Terminal:
    """One tmux server of our own with one pane running `command` (in this process's
    environment plus `env`); the exit code goes to `exit_file`, then the pane idles so its last
    screen can still be read."""

    def __init__(
        self, command: str, exit_file: Path, env: dict[str, str], *, width: int = 160
    ) -> None:
        assert TMUX is not None
        self.socket = f"specmon-host-{uuid.uuid4().hex[:8]}"
        self.exit_file = exit_file
        full = {**os.environ, "TERM": "xterm-256color", **env}
        full.pop("NO_COLOR", None)
        wrapped = f"{command}; echo $? > {exit_file}; sleep 600"
        self.tmux(
            "-f", "/dev/null", "start-server", ";",
            "new-session", "-d", "-s", "t", "-x", str(width), "-y", "45", wrapped,
            env=full,
        )  # fmt: skip

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        assert TMUX is not None
        return subprocess.run(
            [TMUX, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
            env=env,
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "t", "#{pane_title}").strip()

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", text)

    def key(self, key: str) -> None:
        self.tmux("send-keys", "-t", "t", key)

    def exit_code(self) -> int | None:
        text = self.exit_file.read_text().strip() if self.exit_file.exists() else ""
        return int(text) if text else None

    def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_LIMIT_S
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        raise AssertionError(f"gave up waiting for {what}; the screen:\n{self.screen()}")

    def close(self) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def pane_children(term: Terminal, pattern: str) -> list[int]:
    """Pids of the pane shell's children whose command line matches `pattern`."""
    pane_pid = term.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
    result = subprocess.run(
        ["pgrep", "-f", "-P", pane_pid, pattern], capture_output=True, text=True, check=False
    )
    return [int(p) for p in result.stdout.split()]
