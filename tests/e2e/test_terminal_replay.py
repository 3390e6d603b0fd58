"""`specmon replay` in a real terminal: tmux runs the INSTALLED command on the degradation-cycle
sample, we read the screen as a person would (the RECORDED and SIMULATED header, the timeline),
seek with the keys until the cycle is found (the panel's cycle line, the vanilla-speed rows), jump
to a flag with `n`, pause, and quit with `q`: exit status 0, no process left. In CI a missing
tmux or specmon command is a failure, not a skip."""

from __future__ import annotations

import gzip
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.terminal import MISSING, SPECMON, Terminal, needs_terminal
from tests.support.ui_apps import recording_port

pytestmark = needs_terminal
SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "demo-cycle.ndjson.gz"


def _start(tmp_path: Path, recording: Path) -> Terminal:
    assert SPECMON is not None, MISSING
    command = f"cd {shlex.quote(str(tmp_path))} && {SPECMON} replay {shlex.quote(str(recording))}"
    return Terminal(command, tmp_path / "exit-code", width=160)


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    terminal = _start(tmp_path, SAMPLE)
    try:
        yield terminal
    finally:
        terminal.close()


def _elapsed(screen: str) -> float:
    found = re.search(r"(\d+):(\d\d\.\d) / 1:06\.\d", screen)
    assert found, screen
    return int(found.group(1)) * 60 + float(found.group(2))


def _answers(screen: str) -> int:
    found = re.search(r"answers\s+(\d+)\s+failed", screen)
    assert found, screen
    return int(found.group(1))


def test_replay_in_a_real_terminal_seeks_and_finds_the_cycle(term: Terminal) -> None:
    # The header paints first and the timeline a frame later: wait for the whole first frame. The
    # installed command's timeline counts the flags the app's own replay port finds in the file.
    port, _ = recording_port(SAMPLE)
    flagged = f"▼ {len(port.timeline.flags)} flagged"
    port.close()
    wanted = ("RECORDED", "PLAYING", flagged, "cycle every 10 requests")
    term.wait_for(lambda: all(w in term.screen() for w in wanted), "the header and the timeline")
    first = term.screen().splitlines()[0]
    assert first.startswith("RECORDED · SIMULATED · ") and first.rstrip().endswith("SIMULATED")
    term.wait_for(lambda: _elapsed(term.screen()) > 0.5, "the play head to move")

    term.key("Space")
    term.wait_for(lambda: "PAUSED" in term.screen(), "PAUSED")
    # Seek forward 10 s at a time until the panel's cycle line appears: the third cycle.
    for _ in range(8):
        if "cycle: every 10 requests" in term.screen():
            break
        before = _elapsed(term.screen())
        term.key("Right")
        term.wait_for(lambda b=before: _elapsed(term.screen()) > b, "the seek")  # type: ignore[misc]
    # The play head moves a frame before the panel and the rows repaint: wait for them, then read.
    term.wait_for(lambda: "cycle: every 10 requests, 3 degraded" in term.screen(), "the cycle line")
    screen = term.screen()
    assert len(re.findall(r"\br\d+\s.*vanilla-speed", screen)) >= 6
    assert _answers(screen) >= 21

    term.key("Home")
    term.wait_for(lambda: _answers(term.screen()) == 0, "home: no answer yet")
    term.key("n")
    term.key("n")
    # The first flag is r6, a transition (classed once the slow level is seen, a few answers
    # later: the timeline flags what the answers table badges at the end of the recording).
    term.wait_for(lambda: "transition: r6" in term.screen(), "n: the first flagged request")
    rows = [line for line in term.screen().splitlines() if re.search(r"\br\d+\s", line)]
    assert "r6" in rows[-1]

    term.key("+")
    term.key("+")
    term.wait_for(lambda: "\N{MULTIPLICATION SIGN}4" in term.screen(), "the speed x4")

    term.key("q")
    term.wait_for(term.exit_file.exists, "the replay to exit")
    assert term.exit_file.read_text().strip() == "0"
    term.wait_for(lambda: not term.descendants(), "no process of the replay left")
    assert "Traceback" not in term.screen()


def test_a_torn_recording_in_a_real_terminal_replays_to_the_tear_and_says_where(tmp_path) -> None:
    raw = gzip.decompress(SAMPLE.read_bytes())
    cut = raw.index(b"\n", len(raw) // 2) + 20
    torn_line = raw[:cut].count(b"\n") + 1
    torn = tmp_path / "torn.ndjson"
    torn.write_bytes(raw[:cut])
    term = _start(tmp_path, torn)
    try:
        notice = f"torn.ndjson: line {torn_line}: torn last line"
        term.wait_for(lambda: notice in term.screen(), "the notice on the screen")
        term.key("End")
        term.wait_for(lambda: "END" in term.screen(), "the end of what was kept")
        assert 0 < _answers(term.screen()) < 30
        term.key("q")
        term.wait_for(term.exit_file.exists, "the replay to exit")
        assert term.exit_file.read_text().strip() == "0"
        after = term.screen()  # the app is gone: the notice is repeated on stderr
        assert f"specmon replay: notice: {torn}: line {torn_line}: torn last line" in after
    finally:
        term.close()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such recording"),
        (b"hello\n", "not a specmon recording"),
        (b'{"format": "specmon-session", "version": 9}\n', "version 9 is newer"),
    ],
)
def test_bad_input_in_a_real_terminal_is_one_line_and_exit_2(
    tmp_path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "bad.ndjson"
    if content is not None:
        path.write_bytes(content)
    term = _start(tmp_path, path)
    try:
        term.wait_for(term.exit_file.exists, "the command to exit")
        assert term.exit_file.read_text().strip() == "2"
        joined = term.tmux("capture-pane", "-p", "-J", "-t", "t")  # a long path wraps: rejoin it
        lines = [line for line in joined.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("specmon replay: ") and words in lines[0]
    finally:
        term.close()
