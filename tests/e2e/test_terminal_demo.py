"""The README's first command in a real terminal: tmux runs the INSTALLED `specmon demo` (the
Textual app against the built-in simulator), we read the screen as a person would — the SIMULATED
badge, the demo's answers with their numbers, the side panel — press Ctrl-C (or ctrl+q), and check
that it exits cleanly and leaves nothing behind: no demo, no collector process. In CI a missing
tmux or specmon command is a failure, not a skip.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.terminal import MISSING, SPECMON, TMUX, needs_terminal, tmux, wait_for

pytestmark = needs_terminal


def _start(tmp_path: Path) -> tuple[str, Path]:
    assert TMUX is not None and SPECMON is not None, MISSING
    name = f"specmon-test-{uuid.uuid4().hex[:8]}"
    exit_file = tmp_path / "exit-code"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    # The variables go through `env` in the command: a tmux server that is already running
    # gives new sessions its own environment, not the client's.
    passed = " ".join(
        f"{k}={shlex.quote(env[k])}" for k in ("PYTHONPATH", "TERM", "HOME") if k in env
    )
    command = (
        f"cd {shlex.quote(str(tmp_path))} && env {passed} {SPECMON} demo --speed 20; "
        f"echo $? > {exit_file}; sleep 600"
    )
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", name, "-x", "160", "-y", "45", command],
        check=True,
        env=env,
        timeout=30,
    )
    return name, exit_file


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    name, exit_file = _start(tmp_path)
    try:
        yield name, exit_file
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True, timeout=30)


def _screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def _descendants(name: str) -> list[str]:
    """Every process below the tmux pane's shell except the final `sleep` (the demo, its
    collector process, multiprocessing's resource tracker)."""
    pane_pid = tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip()
    found: list[str] = []
    todo = [pane_pid]
    while todo:
        pid = todo.pop()
        children = subprocess.run(
            ["pgrep", "-P", pid], capture_output=True, text=True
        ).stdout.split()
        for child in children:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if not cmd.startswith("sleep"):
                found.append(f"{child} {cmd}")
            todo.append(child)
    return found


def _answers_done(screen: str) -> int:
    return len(re.findall(r"\d+ tokens · [\d.]+ tok/s", screen))


@pytest.mark.parametrize("key", ["C-c", "C-q"])
def test_demo_in_a_real_terminal_shows_simulated_answers_and_numbers_and_quits(
    session, key: str
) -> None:
    name, exit_file = session
    wait_for(lambda: "SIMULATED" in _screen(name), "the SIMULATED badge")
    # The demo sends its own prompts: answers arrive with their numbers under them.
    wait_for(lambda: _answers_done(_screen(name)) >= 1, "a finished answer with its numbers")
    wait_for(lambda: "AL " in _screen(name) and "(server)" in _screen(name), "the answer's AL")
    screen = _screen(name)
    assert screen.splitlines()[0].rstrip().endswith("SIMULATED")  # the header, always on top
    assert "vLLM" in screen and "per-position acceptance" in screen  # the side panel
    assert "tok/s  server" in screen
    assert "\x1b" not in screen  # capture-pane gives text; no raw escapes leak into it
    assert _descendants(name), "the demo should still be running before the key"

    tmux("send-keys", "-t", name, key)
    wait_for(exit_file.exists, "the demo to exit")
    assert exit_file.read_text().strip() == "0"
    wait_for(lambda: not _descendants(name), "no process of the demo left")
    assert "Traceback" not in _screen(name)
