"""`specmon chat --attach` in a real terminal: tmux runs the INSTALLED `specmon` command against a
simulator (`specmon sim`, its own process on a free port) and against a tiny canned server whose
answer is crafted to attack the terminal; we type a prompt as a person would, read the captured
screen, quit with ctrl+q, and check that nothing is left running. In CI a missing tmux or specmon
command is a failure, not a skip.

Each test uses its own tmux server (`-L`), so the pane gets this process's environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.component.conftest import CannedServer

from specmon.sim.corpus import ANSWERS

TMUX = shutil.which("tmux")
SPECMON = shutil.which("specmon")

MISSING = "needs tmux and the installed specmon command (pip install -e .)"
pytestmark = pytest.mark.skipif(
    (TMUX is None or SPECMON is None) and not os.environ.get("CI"), reason=MISSING
)

WAIT_LIMIT_S = 90.0
"""Upper bound on waiting for the screen to show something: a failure bound, not a speed target."""


class Terminal:
    """One tmux server with one 140x45 pane running `command`; the command's exit code is
    written to `exit_file` and the pane then idles (so its last screen can still be read)."""

    def __init__(self, command: str, exit_file: Path) -> None:
        assert TMUX is not None
        self.socket = f"specmon-chat-{uuid.uuid4().hex[:8]}"
        self.exit_file = exit_file
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        wrapped = f"{command}; echo $? > {exit_file}; sleep 600"
        # A server of our own, no user config, and OSC 52 from the program accepted into tmux's
        # paste buffers (the default "external" ignores it), so a clipboard write would show.
        self.tmux(
            "-f", "/dev/null", "start-server", ";", "set", "-g", "set-clipboard", "on", ";",
            "new-session", "-d", "-s", "t", "-x", "220", "-y", "45", wrapped,
            env=env,
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

    def chat_pids(self) -> list[str]:
        """Processes still running `specmon chat` under this pane's shell."""
        pane_pid = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        result = subprocess.run(
            ["pgrep", "-f", "-P", pane_pid, "specmon chat"], capture_output=True, text=True
        )
        return result.stdout.split()

    def close(self) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def _wait_for(predicate: Callable[[], bool], what: str, term: Terminal) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"gave up waiting for {what}; the screen:\n{term.screen()}")


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


def _quit(term: Terminal) -> None:
    assert term.chat_pids(), "the chat should still be running before ctrl+q"
    term.key("C-q")
    _wait_for(term.exit_file.exists, "the chat to exit after ctrl+q", term)
    assert term.exit_file.read_text().strip() == "0"
    assert term.chat_pids() == []
    assert "Traceback" not in term.screen()


def test_chat_attached_to_a_simulator_streams_an_answer_with_its_numbers(
    sim_url: str, terminal
) -> None:
    term = terminal(f"--attach {sim_url} --max-tokens 60")
    _wait_for(lambda: "SIMULATED" in term.screen(), "the SIMULATED badge", term)
    _wait_for(lambda: sim_url in term.screen(), "the connected header", term)
    term.type("What is speculative decoding?")
    term.key("Enter")
    _wait_for(lambda: "60 tokens" in term.screen(), "the answer's numbers line", term)
    screen = term.screen()
    assert "What is speculative decoding?" in screen  # the prompt, echoed in the conversation
    # The answer's text: the simulator writes the start of one of its corpus answers.
    assert any(answer[:30] in screen for answer in ANSWERS), screen
    numbers = next(line for line in screen.splitlines() if "60 tokens" in line)
    assert " tok/s" in numbers and "AL " in numbers
    assert "AL —" not in numbers  # the simulator's chunks give a client-side AL
    assert "tok/s" in numbers and "— tok/s" not in numbers
    assert "SIMULATED" in screen
    assert "\x1b" not in screen
    _quit(term)


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
        _wait_for(lambda: server.url in term.screen(), "the connected header", term)
        title_before = term.title()
        term.type("hi")
        term.key("Enter")
        _wait_for(lambda: "7 tokens" in term.screen(), "the crafted answer's numbers", term)
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
        _quit(term)
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
        _wait_for(term.exit_file.exists, "the raw print to end", term)
        _wait_for(lambda: "PWNED" in term.title(), "the title set by the raw escapes", term)
        assert "pwned" in term.buffers()
    finally:
        term.close()
