"""`specmon replay` in a real terminal: tmux runs the INSTALLED command on the degradation-cycle
sample, we read the screen as a person would (the RECORDED and SIMULATED header, the timeline),
seek with the keys until the cycle is found (the panel's cycle line, the vanilla-speed rows), jump
to a flag with `n`, pause, and quit with `q`: exit status 0, no process left. In CI a missing
tmux or specmon command is a failure, not a skip."""

from __future__ import annotations

import gzip
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
SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "demo-cycle.ndjson.gz"


def _start(tmp_path: Path, recording: Path) -> tuple[str, Path]:
    assert TMUX is not None and SPECMON is not None, MISSING
    name = f"specmon-replay-{uuid.uuid4().hex[:8]}"
    exit_file = tmp_path / "exit-code"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    passed = " ".join(
        f"{k}={shlex.quote(env[k])}" for k in ("PYTHONPATH", "TERM", "HOME") if k in env
    )
    command = (
        f"cd {shlex.quote(str(tmp_path))} && env {passed} {SPECMON} replay "
        f"{shlex.quote(str(recording))}; echo $? > {exit_file}; sleep 600"
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
    name, exit_file = _start(tmp_path, SAMPLE)
    try:
        yield name, exit_file
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True, timeout=30)


def _screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def _elapsed(screen: str) -> float:
    found = re.search(r"(\d+):(\d\d\.\d) / 1:06\.\d", screen)
    assert found, screen
    return int(found.group(1)) * 60 + float(found.group(2))


def _answers(screen: str) -> int:
    found = re.search(r"answers\s+(\d+)\s+failed", screen)
    assert found, screen
    return int(found.group(1))


def _descendants(name: str) -> list[str]:
    pane_pid = tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip()
    found: list[str] = []
    todo = [pane_pid]
    while todo:
        pid = todo.pop()
        out = subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True).stdout
        for child in out.split():
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if not cmd.startswith("sleep"):
                found.append(f"{child} {cmd}")
            todo.append(child)
    return found


def test_replay_in_a_real_terminal_seeks_and_finds_the_cycle(session) -> None:
    name, exit_file = session
    wait_for(lambda: "RECORDED" in _screen(name), "the RECORDED header")
    screen = _screen(name)
    first = screen.splitlines()[0]
    assert first.startswith("RECORDED · SIMULATED · ") and first.rstrip().endswith("SIMULATED")
    assert "PLAYING" in screen and "▼ 9 flagged" in screen and "cycle every 10 requests" in screen
    wait_for(lambda: _elapsed(_screen(name)) > 0.5, "the play head to move")

    tmux("send-keys", "-t", name, "Space")
    wait_for(lambda: "PAUSED" in _screen(name), "PAUSED")
    # Seek forward 10 s at a time until the panel's cycle line appears: the third cycle.
    for _ in range(8):
        if "cycle: every 10 requests" in _screen(name):
            break
        before = _elapsed(_screen(name))
        tmux("send-keys", "-t", name, "Right")
        wait_for(lambda b=before: _elapsed(_screen(name)) > b, "the seek")  # type: ignore[misc]
    screen = _screen(name)
    assert "cycle: every 10 requests, 3 degraded" in screen
    assert len(re.findall(r"\br\d+\s.*vanilla-speed", screen)) >= 6
    assert _answers(screen) >= 21

    tmux("send-keys", "-t", name, "Home")
    wait_for(lambda: _answers(_screen(name)) == 0, "home: no answer yet")
    tmux("send-keys", "-t", name, "n")
    tmux("send-keys", "-t", name, "n")
    wait_for(lambda: "vanilla speed: r7" in _screen(name), "n: the first flagged request")
    rows = [line for line in _screen(name).splitlines() if re.search(r"\br\d+\s", line)]
    assert "r7" in rows[-1] and "vanilla-speed" in rows[-1]

    tmux("send-keys", "-t", name, "+")
    tmux("send-keys", "-t", name, "+")
    wait_for(lambda: "\N{MULTIPLICATION SIGN}4" in _screen(name), "the speed x4")

    tmux("send-keys", "-t", name, "q")
    wait_for(exit_file.exists, "the replay to exit")
    assert exit_file.read_text().strip() == "0"
    wait_for(lambda: not _descendants(name), "no process of the replay left")
    assert "Traceback" not in _screen(name)


def test_a_torn_recording_in_a_real_terminal_replays_to_the_tear_and_says_where(tmp_path) -> None:
    raw = gzip.decompress(SAMPLE.read_bytes())
    cut = raw.index(b"\n", len(raw) // 2) + 20
    torn_line = raw[:cut].count(b"\n") + 1
    torn = tmp_path / "torn.ndjson"
    torn.write_bytes(raw[:cut])
    name, exit_file = _start(tmp_path, torn)
    try:
        notice = f"torn.ndjson: line {torn_line}: torn last line"
        wait_for(lambda: notice in _screen(name), "the notice on the screen")
        tmux("send-keys", "-t", name, "End")
        wait_for(lambda: "END" in _screen(name), "the end of what was kept")
        assert 0 < _answers(_screen(name)) < 30
        tmux("send-keys", "-t", name, "q")
        wait_for(exit_file.exists, "the replay to exit")
        assert exit_file.read_text().strip() == "0"
        after = _screen(name)  # the app is gone: the notice is repeated on stderr
        assert f"specmon replay: notice: {torn}: line {torn_line}: torn last line" in after
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True, timeout=30)


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
    name, exit_file = _start(tmp_path, path)
    try:
        wait_for(exit_file.exists, "the command to exit")
        assert exit_file.read_text().strip() == "2"
        joined = tmux("capture-pane", "-p", "-J", "-t", name)  # a long path wraps: rejoin it
        lines = [line for line in joined.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("specmon replay: ") and words in lines[0]
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True, timeout=30)
