"""Chat-screen actions users of other terminal chats expect: copy the last answer or its last
code block (the screen hands the text to Textual's copy_to_clipboard: OSC 52, so it works over
ssh where the terminal allows it). A terminal may drop OSC 52 without a word (tmux without
set-clipboard, many terminals by default), so the text is also written to a file
(`$XDG_STATE_HOME/specmon/clipboard.txt`, `keep_copy`) and the line names it. Taking back the last
turn (ctrl+up) is the screen's own (ui/screens/chat.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specmon.core.code_blocks import code_blocks
from specmon.sources.data_files import state_path, write_atomic
from specmon.ui.conversation import Turn

CLIPBOARD_FILE = "clipboard.txt"
"""The file under specmon's XDG state directory that holds the last copied text."""


def _last_answer(turns: Sequence[Turn]) -> str | None:
    for turn in reversed(turns):
        if turn.status != "streaming" and turn.answer:
            return turn.answer
    return None


def answer_to_copy(turns: Sequence[Turn], *, code: bool = False) -> tuple[str | None, str, bool]:
    """The last finished answer (with `code`, its last code block): (text to copy, what it is,
    e.g. "the last answer (951 characters)", False), or (None, why nothing is copied, True)."""
    answer = _last_answer(turns)
    if answer is None:
        return None, "nothing to copy yet: no finished answer", True
    if code:
        blocks = code_blocks(answer)
        if not blocks:
            return None, "the last answer has no code block", True
        n = blocks[-1].count("\n") + 1
        return blocks[-1], f"the last code block ({n} line{'s' if n != 1 else ''})", False
    return answer, f"the last answer ({len(answer)} characters)", False


def keep_copy(text: str, path: Path | None = None) -> tuple[Path, str | None]:
    """Write the copied `text` to `path` (default: CLIPBOARD_FILE under specmon's XDG state
    directory), the owner's only, replacing the last one: (the path, None), or (the path, why it
    could not be written)."""
    target = path or state_path(CLIPBOARD_FILE)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(target, text)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return target, reason
    return target, None


def copied_line(what: str, path: Path, error: str | None) -> str:
    """The line after a copy: the text was sent to the terminal (whether the terminal took it
    cannot be known), and where else it is."""
    sent = f"{what} sent to the terminal's clipboard (OSC 52)"
    if error is not None:
        return f"{sent}; it could not also be written to {path}: {error}"
    return f"{sent} — if nothing was copied, the text is also in {path}"
