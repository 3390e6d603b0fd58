"""SIGHUP (the terminal closed) stops the Textual commands cleanly, like SIGTERM: tmux runs the
INSTALLED `specmon` (watch, demo, replay, attached chat) in a real terminal; once the app is on
screen the command's process gets SIGHUP. It must exit with 129 (128 + SIGHUP, the shell's
convention), put the terminal back (alternate screen left, mouse reporting off: what tmux says of
the pane after the exit) and leave no process of its own behind (the collector,
multiprocessing's helpers).

The command's process is signalled alone (a shell passing the hang-up on to its job), and, for
watch, together with its collector process (the kernel's hang-up to the whole foreground job)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.terminal import MISSING, SPECMON, Terminal, needs_terminal

from specmon.sim.server import SimConfig, start_in_thread

pytestmark = needs_terminal

SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "demo-cycle.ndjson.gz"
PANE_MODES = "#{alternate_on} #{mouse_any_flag} #{mouse_button_flag} #{mouse_standard_flag}"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with start_in_thread(SimConfig(speed=20.0, n_spec=4, seed=1), log_sink=lambda _l: None) as s:
        yield s.url


def _modes(term: Terminal) -> list[str]:
    return term.tmux("display-message", "-p", "-t", "t", PANE_MODES).split()


@pytest.mark.parametrize(
    ("command", "everyone"),
    [("watch", False), ("demo", False), ("replay", False), ("chat", False), ("watch", True)],
    ids=["watch", "demo", "replay", "chat", "watch-and-its-children"],
)
def test_sighup_stops_the_app_restores_the_terminal_and_leaves_nothing(
    command: str, everyone: bool, sim_url: str, tmp_path: Path
) -> None:
    """`everyone`: the collector process gets SIGHUP too, at the same time, as the kernel sends
    it to the whole foreground job when the terminal goes away."""
    assert SPECMON is not None, MISSING
    args = {
        "watch": ["watch", "--attach", sim_url, "--interval", "0.3"],
        "demo": ["demo", "--speed", "20"],
        "replay": ["replay", str(SAMPLE)],
        "chat": ["chat", "--attach", sim_url],
    }[command]
    line = f"cd {shlex.quote(str(tmp_path))} && {SPECMON} {shlex.join(args)}"
    term = Terminal(line, tmp_path / "exit-code", width=160)
    try:
        term.wait_for(
            lambda: _modes(term)[0] == "1" and "1" in _modes(term)[1:],
            "the app in the alternate screen with mouse reporting on",
        )
        term.wait_for(lambda: len(term.screen().split()) > 10, "the app's screen")
        pids = term.children("specmon")
        assert len(pids) == 1, pids
        others = [int(d.split()[0]) for d in term.descendants()] if everyone else []
        for pid in [pids[0], *(p for p in others if p != pids[0])]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
        term.wait_for(term.exit_file.exists, f"{command} to exit after SIGHUP")
        assert term.exit_code() == 128 + int(signal.SIGHUP), term.screen()
        assert _modes(term) == ["0", "0", "0", "0"], (
            f"terminal left in app modes: {_modes(term)} {term.screen()[-600:]!r}"
        )
        term.wait_for(lambda: not term.descendants(), f"no process of {command} left")
        assert "Traceback" not in term.screen()
    finally:
        term.close()
