"""Is there a terminal? The one answer for every command: whether a person is at a terminal
(the Textual app can open), whether a command runs for a browser (`specmon web`), and whether
one output stream is a terminal (Rich progress and widths, or plain lines)."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
"""The Textual driver that textual-serve (`specmon web`) sets in TEXTUAL_DRIVER for the app
process it starts per browser session: stdin and stdout are then its pipes, not a terminal."""


def is_terminal(stream: IO[Any]) -> bool:
    """Whether `stream` is a terminal (False for a closed or detached stream, or an object with
    no file behind it)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def on_terminal() -> bool:
    """Whether a person is at a terminal: standard input and standard output both ttys (keys
    can be read and the screen drawn)."""
    return is_terminal(sys.stdin) and is_terminal(sys.stdout)


def served_to_browser() -> bool:
    """True in an app process started by textual-serve (`specmon web`)."""
    return os.environ.get("TEXTUAL_DRIVER", "") == WEB_DRIVER


def wants_app() -> bool:
    """Whether a command that has a Textual screen should open it: on a terminal (stdin and
    stdout both ttys), or when textual-serve runs it for a browser."""
    return served_to_browser() or on_terminal()
