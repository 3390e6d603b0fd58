"""A real terminal for the end-to-end tests: tmux, a server of its own per test, one pane that runs
a command, and what a person would read off it (the screen, the title, tmux's paste buffers)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.waiting import wait_for

TMUX = shutil.which("tmux")
SPECMON = shutil.which("specmon")
MISSING = "needs tmux and the installed specmon command (pip install -e .)"
needs_terminal = pytest.mark.terminal
"""The `terminal` tier: tests/conftest.py skips it where tmux or the installed command is
missing, except in CI, where that fails."""

WAIT_LIMIT_S = 90.0
"""Upper bound on waiting for the screen to show something: a failure bound, not a speed target."""


class Terminal:
    """One tmux server of our own with one pane (`width` x 45) running `command` in this
    process's environment plus `env`; the exit code goes to `exit_file`, then the pane idles so
    its last screen can still be read. OSC 52 from the program is accepted into tmux's paste
    buffers (the default "external" ignores it), so a clipboard write would show."""

    def __init__(
        self,
        command: str,
        exit_file: Path,
        env: dict[str, str] | None = None,
        *,
        width: int = 220,
        wait_limit_s: float = WAIT_LIMIT_S,
    ) -> None:
        assert TMUX is not None, MISSING
        self.socket = f"specmon-{uuid.uuid4().hex[:8]}"
        self.exit_file = exit_file
        self.wait_limit_s = wait_limit_s
        full = {**os.environ, "TERM": "xterm-256color", **(env or {})}
        full.pop("NO_COLOR", None)
        wrapped = f"{command}; echo $? > {exit_file}; sleep 600"
        self.tmux(
            "-f", "/dev/null", "start-server", ";", "set", "-g", "set-clipboard", "on", ";",
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

    def buffers(self) -> str:
        """tmux's paste buffers (where an accepted OSC 52 clipboard write lands)."""
        return self.tmux("list-buffers")

    def exit_code(self) -> int | None:
        text = self.exit_file.read_text().strip() if self.exit_file.exists() else ""
        return int(text) if text else None

    def children(self, pattern: str) -> list[int]:
        """Pids of the pane shell's children whose command line matches `pattern`."""
        pane_pid = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        result = subprocess.run(
            ["pgrep", "-f", "-P", pane_pid, pattern], capture_output=True, text=True, check=False
        )
        return [int(p) for p in result.stdout.split()]

    def descendants(self) -> list[str]:
        """Every process below the pane's shell but the final `sleep` ("pid command line"): the
        command, its collector process, multiprocessing's resource tracker."""
        pane_pid = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        found: list[str] = []
        todo = [pane_pid]
        while todo:
            pid = todo.pop()
            out = subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True).stdout
            for child in out.split():
                try:
                    cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:  # gone meanwhile
                    continue
                if not cmd.startswith(b"sleep"):
                    found.append(f"{child} {cmd.decode(errors='replace')}")
                todo.append(child)
        return found

    def wait_for(self, predicate: Callable[[], object], what: str) -> None:
        """Poll `predicate` (the screen is read 3 times a second at most: each read is a tmux
        call); on giving up the message shows the screen."""
        wait_for(predicate, what, timeout=self.wait_limit_s, interval=0.3, detail=self.screen)

    def close(self) -> None:
        """Stop the tmux server and remove its socket file (tmux 3.3 leaves it behind: one file
        in /tmp/tmux-UID for every terminal test otherwise)."""
        assert TMUX is not None
        where = subprocess.run(
            [TMUX, "-L", self.socket, "display-message", "-p", "#{socket_path}"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        if where:
            with contextlib.suppress(OSError):
                Path(where).unlink()
