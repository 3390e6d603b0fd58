"""The one terminal check (`runtime/terminal.py`)."""

from __future__ import annotations

import io
import os

import pytest

from specmon.runtime import terminal


def test_a_pty_is_a_terminal_and_a_pipe_or_buffer_is_not() -> None:
    main, side = os.openpty()
    with open(side, "w") as tty, io.StringIO() as buffer:
        assert terminal.is_terminal(tty) is True
        assert terminal.is_terminal(buffer) is False
    r, w = os.pipe()
    with open(r) as pipe_in, open(w, "w") as pipe_out:
        assert terminal.is_terminal(pipe_in) is False and terminal.is_terminal(pipe_out) is False
    os.close(main)


def test_a_closed_stream_is_not_a_terminal_and_does_not_raise() -> None:
    buffer = io.StringIO()
    buffer.close()
    assert terminal.is_terminal(buffer) is False  # isatty() itself raises ValueError here


def test_a_person_is_at_a_terminal_only_with_both_stdin_and_stdout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main, side = os.openpty()
    with open(side) as tty_in, open(os.dup(side), "w") as tty:
        monkeypatch.setattr("sys.stdin", tty_in)
        monkeypatch.setattr("sys.stdout", tty)
        assert terminal.on_terminal() is True
        monkeypatch.setattr("sys.stdout", io.StringIO())  # `specmon watch … > file`
        assert terminal.on_terminal() is False
        monkeypatch.setattr("sys.stdout", tty)
        monkeypatch.setattr("sys.stdin", io.StringIO())  # `… | specmon watch`
        assert terminal.on_terminal() is False
        monkeypatch.setenv("TEXTUAL_DRIVER", terminal.WEB_DRIVER)  # a page of `specmon web`
        assert terminal.wants_app() is True
    os.close(main)
