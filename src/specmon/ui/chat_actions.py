"""Chat-screen actions users of other terminal chats expect: copy the last answer or its last
code block (the screen hands the text to Textual's copy_to_clipboard: OSC 52, so it works over
ssh where the terminal allows it). Taking back the last turn (ctrl+up) is the screen's own
(ui/screens/chat.py). Each returns what to copy and the line the screen shows."""

from __future__ import annotations

from collections.abc import Sequence

from specmon.core.code_blocks import code_blocks
from specmon.ui.conversation import Turn


def _last_answer(turns: Sequence[Turn]) -> str | None:
    for turn in reversed(turns):
        if turn.status != "streaming" and turn.answer:
            return turn.answer
    return None


def answer_to_copy(turns: Sequence[Turn], *, code: bool = False) -> tuple[str | None, str, bool]:
    """The last finished answer (with `code`, its last code block): (text to copy or None,
    line, failed)."""
    answer = _last_answer(turns)
    if answer is None:
        return None, "nothing to copy yet: no finished answer", True
    if code:
        blocks = code_blocks(answer)
        if not blocks:
            return None, "the last answer has no code block", True
        n = blocks[-1].count("\n") + 1
        return blocks[-1], f"copied the last code block ({n} line{'s' if n != 1 else ''})", False
    return answer, f"copied the last answer ({len(answer)} characters)", False
