"""The README's first command in a real terminal: tmux runs the INSTALLED `specmon demo`, we read
the screen as a person would, press Ctrl-C, and check that it exits cleanly and leaves nothing
behind. In CI a missing tmux or specmon command is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
SPECMON = shutil.which("specmon")

MISSING = "needs tmux and the installed specmon command (pip install -e .)"
pytestmark = pytest.mark.skipif(
    (TMUX is None or SPECMON is None) and not os.environ.get("CI"), reason=MISSING
)

WAIT_LIMIT_S = 90.0
"""Upper bound on waiting for the screen to show something: a failure bound, not a speed target."""


def _tmux(*args: str) -> str:
    assert TMUX is not None
    return subprocess.run(
        [TMUX, *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    assert TMUX is not None and SPECMON is not None, MISSING
    name = f"specmon-test-{uuid.uuid4().hex[:8]}"
    exit_file = tmp_path / "exit-code"
    command = f"{SPECMON} demo --speed 20; echo $? > {exit_file}; sleep 600"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", name, "-x", "140", "-y", "50", command],
        check=True,
        env=env,
        timeout=30,
    )
    try:
        yield name, exit_file
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True, timeout=30)


def _screen(name: str) -> str:
    return _tmux("capture-pane", "-p", "-t", name)


def _demo_pids(name: str) -> list[str]:
    """Processes still running `specmon demo` from this tmux pane."""
    pane_pid = _tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip()
    result = subprocess.run(
        ["pgrep", "-f", "-P", pane_pid, "specmon demo"], capture_output=True, text=True
    )
    return result.stdout.split()


def test_demo_in_a_real_terminal_shows_simulated_numbers_and_stops_on_ctrl_c(session) -> None:
    name, exit_file = session
    _wait_for(lambda: "SIMULATED" in _screen(name), "the SIMULATED label")
    # Requests complete and their rows carry a decode speed and an acceptance length.
    _wait_for(lambda: "r3 " in _screen(name), "three finished requests on screen")
    screen = _screen(name)
    assert "specmon demo" in screen
    assert "decode tok/s" in screen
    assert "AL client" in screen
    assert "\x1b" not in screen  # capture-pane gives text; no raw escapes leak into it
    assert _demo_pids(name), "the demo should still be running before Ctrl-C"

    _tmux("send-keys", "-t", name, "C-c")
    _wait_for(exit_file.exists, "the demo to exit after Ctrl-C")
    assert exit_file.read_text().strip() == "130"  # interrupted, by convention 128 + SIGINT
    assert _demo_pids(name) == []
    assert "Traceback" not in _screen(name)
