"""`specmon chat` in a real terminal (tests.support.terminal): the steps the e2e and real-vLLM
chat tests share."""

from __future__ import annotations

from tests.support.terminal import Terminal


def quit_chat(term: Terminal) -> None:
    """ctrl+q in a running chat: it exits with 0, leaves no process and no traceback."""
    assert term.children("specmon chat"), "the chat should still be running before ctrl+q"
    term.key("C-q")
    term.wait_for(term.exit_file.exists, "the chat to exit after ctrl+q")
    assert term.exit_file.read_text().strip() == "0"
    assert term.children("specmon chat") == []
    assert "Traceback" not in term.screen()
