"""`specmon chat --attach` in a real terminal: tmux runs the INSTALLED `specmon` command against a
simulator (`specmon sim`, its own process on a free port) and against a tiny canned server whose
answer is crafted to attack the terminal; we type a prompt as a person would, read the captured
screen, quit with ctrl+q, and check that nothing is left running. In CI a missing tmux or specmon
command is a failure, not a skip.

Each test uses its own tmux server (`-L`), so the pane gets this process's environment.
"""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.canned_server import CannedServer
from tests.support.terminal import MISSING, SPECMON, Terminal, needs_terminal
from tests.support.terminal_chat import quit_chat

from specmon.core.session_state import SessionState
from specmon.sim.corpus import ANSWERS
from specmon.sources.recording_player import RecordingPlayer, read_recording
from specmon.ui.widgets.turn import FLAG_WORDS

pytestmark = needs_terminal


@pytest.fixture
def sim_url() -> Iterator[str]:
    """`specmon sim` (the installed command) on a free loopback port, fast."""
    assert SPECMON is not None, MISSING
    proc = subprocess.Popen(
        [SPECMON, "sim", "--port", "0", "--speed", "20", "--log-interval", "0", "--seed", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield next(word for word in line.split() if word.startswith("http://"))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert proc.poll() is not None


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[[str], Terminal]]:
    started: list[Terminal] = []

    def start(args: str) -> Terminal:
        assert SPECMON is not None, MISSING
        term = Terminal(f"{SPECMON} chat {args}", tmp_path / f"exit-{len(started)}")
        started.append(term)
        return term

    yield start
    for term in started:
        term.close()


def test_chat_attached_to_a_simulator_streams_an_answer_with_its_numbers(
    sim_url: str, terminal, tmp_path: Path
) -> None:
    recording = tmp_path / "chat.jsonl"
    term = terminal(f"--attach {sim_url} --max-tokens 60 --record {recording}")
    term.wait_for(lambda: "SIMULATED" in term.screen(), "the SIMULATED badge")
    term.wait_for(lambda: sim_url in term.screen(), "the connected header")
    term.type("What is speculative decoding?")
    term.key("Enter")
    # The finished answer's line ends with its verdict; the line of an answer still streaming
    # has none (quitting then would cancel it).
    term.wait_for(lambda: _finished_line(term.screen()), "the finished answer's numbers line")
    screen = term.screen()
    assert "What is speculative decoding?" in screen  # the prompt, echoed in the conversation
    # The answer's text: the simulator writes the start of one of its corpus answers.
    assert any(answer[:30] in screen for answer in ANSWERS), screen
    numbers = next(line for line in screen.splitlines() if "60 tokens" in line)
    assert " tok/s" in numbers and "AL " in numbers
    assert "AL —" not in numbers  # the simulator's chunks give a client-side AL
    assert "SIMULATED" in screen
    assert "\x1b" not in screen
    quit_chat(term)
    # The decode speed is shown whenever the chunks' arrival times measure one: a loaded machine
    # can read a whole short answer at one instant, and then it is "—" (not a made-up number).
    recorded = read_recording(recording)
    replayed = SessionState(recorded.info)
    asyncio.run(RecordingPlayer(recording).run(replayed.apply))
    kinds = collections.Counter(type(e).__name__ for e in recorded.events)
    assert len(replayed.view().rows) == 1, (kinds, recorded.problems)
    (row,) = replayed.view().rows
    assert row.completion_tokens == 60
    measured = row.decode_tok_s is not None
    assert ("— tok/s" not in numbers) == measured, (numbers, row.decode_tok_s)


def _finished_line(screen: str) -> bool:
    """Whether the screen shows the 60-token answer's numbers line with its verdict."""
    verdicts = [word for word in FLAG_WORDS.values() if word]
    return any(
        "60 tokens" in line and any(line.rstrip(" ▏").endswith(v) for v in verdicts)
        for line in screen.splitlines()
    )


def _chunk(text: str, tokens: int, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "canned-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
    }


CRAFTED = [
    _chunk("A\x1b[2J\x1b]0;PWNED-TITLE\x07\x1b]52;c;cHduZWQ=\x07 ", 1),
    _chunk("\x1b]2;PWNED-TITLE2\x1b\\ \x9b31m \u202eRTL\u202c ", 3),
    _chunk("[bold red]red[/] [@click=app.quit]quit[/]\n\n", 5),
    _chunk("Z\r\x1b[1A\x1b[?1049l end.", 7, "stop"),
]


def test_crafted_output_is_shown_literally_and_changes_nothing_in_the_terminal(terminal) -> None:
    server = CannedServer(CRAFTED)
    try:
        term = terminal(f"--attach {server.url}")
        term.wait_for(lambda: server.url in term.screen(), "the connected header")
        title_before = term.title()
        term.type("hi")
        term.key("Enter")
        term.wait_for(lambda: "7 tokens" in term.screen(), "the crafted answer's numbers")
        screen = term.screen()
        assert "A␛[2J␛]0;PWNED-TITLE␇␛]52;c;cHduZWQ=␇" in screen
        assert "␛]2;PWNED-TITLE2␛\\ <U+009B>31m <U+202E>RTL<U+202C>" in screen
        assert "[bold red]red[/] [@click=app.quit]quit[/]" in screen
        assert "Z␍␛[1A␛[?1049l end." in screen
        # The screen was not cleared (the header is still there), the title was not set, the
        # app did not quit on the markup, and nothing was written to the clipboard buffer.
        assert server.url in screen
        assert "PWNED" not in term.title()
        assert term.title() == title_before
        assert "pwned" not in term.buffers()
        assert json.dumps(server.requests[0]["messages"][-1]) == json.dumps(
            {"role": "user", "content": "hi"}
        )
        quit_chat(term)
    finally:
        server.stop()


def test_the_terminal_checks_would_see_raw_escapes(tmp_path: Path) -> None:
    """The control: the same bytes printed raw DO set the pane title and write a paste buffer in
    this tmux setup, so the checks above can fail."""
    payload = "".join(c["choices"][0]["delta"]["content"] for c in CRAFTED)
    script = tmp_path / "raw.py"
    script.write_text(f"import sys; sys.stdout.write({payload!r}); sys.stdout.flush()\n")
    term = Terminal(f"{sys.executable} {script}", tmp_path / "exit")
    try:
        term.wait_for(term.exit_file.exists, "the raw print to end")
        term.wait_for(lambda: "PWNED" in term.title(), "the title set by the raw escapes")
        assert "pwned" in term.buffers()
    finally:
        term.close()
