"""The README's first command in a real terminal: tmux runs the INSTALLED `specmon demo` (the
Textual app against the built-in simulator), we read the screen as a person would — the SIMULATED
badge, the demo's answers with their numbers, the side panel — press Ctrl-C (or ctrl+q), and check
that it exits cleanly (130 after Ctrl-C, as after SIGINT; 0 after ctrl+q) and leaves nothing
behind: no demo, no collector process. In CI a missing tmux or specmon command is a failure, not
a skip.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.terminal import MISSING, SPECMON, Terminal, needs_terminal

pytestmark = needs_terminal


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    assert SPECMON is not None, MISSING
    command = f"cd {shlex.quote(str(tmp_path))} && {SPECMON} demo --speed 20"
    terminal = Terminal(command, tmp_path / "exit-code", width=160)
    try:
        yield terminal
    finally:
        terminal.close()


def _answers_done(screen: str) -> int:
    return len(re.findall(r"\d+ tokens · [\d.]+ tok/s", screen))


@pytest.mark.parametrize("key", ["C-c", "C-q"])
def test_demo_in_a_real_terminal_shows_simulated_answers_and_numbers_and_quits(
    term: Terminal, key: str
) -> None:
    term.wait_for(lambda: "SIMULATED" in term.screen(), "the SIMULATED badge")
    # The demo sends its own prompts: answers arrive with their numbers under them.
    term.wait_for(lambda: _answers_done(term.screen()) >= 1, "a finished answer with its numbers")
    term.wait_for(lambda: "AL " in term.screen() and "(server)" in term.screen(), "the answer's AL")
    screen = term.screen()
    assert screen.splitlines()[0].rstrip().endswith("SIMULATED")  # the header, always on top
    assert "vLLM" in screen and "per-position acceptance" in screen  # the side panel
    assert "tok/s  server" in screen
    # The demo knows its simulator's method and draft (a server announces neither): shown, and
    # labelled as the simulator's (it showed "method —").
    assert re.search(r"method dflash · n_spec +8 +\(simulator's\)", screen)
    assert "draft  z-lab/" in screen
    assert "\x1b" not in screen  # capture-pane gives text; no raw escapes leak into it
    assert term.descendants(), "the demo should still be running before the key"

    term.key(key)
    term.wait_for(term.exit_file.exists, "the demo to exit")
    assert term.exit_file.read_text().strip() == {"C-c": "130", "C-q": "0"}[key]
    term.wait_for(lambda: not term.descendants(), "no process of the demo left")
    assert "Traceback" not in term.screen()


def test_a_closed_terminal_leaves_no_tmux_socket(tmp_path: Path) -> None:
    # The harness's own hygiene: tmux 3.3's kill-server leaves its socket file behind.
    term = Terminal("true", tmp_path / "exit")
    term.wait_for(lambda: (tmp_path / "exit").exists(), "the command to end")
    socket = Path(term.tmux("display-message", "-p", "#{socket_path}").strip())
    assert socket.exists()
    term.close()
    assert not socket.exists()
