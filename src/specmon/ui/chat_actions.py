"""Chat-screen actions users of other terminal chats expect: copy the last answer or its last
code block (Textual's copy_to_clipboard: OSC 52, so it works over ssh where the terminal allows
it), and take back the last turn to edit its prompt and send it again. The screen binds them
(ui/app/screens.py); each returns the line the screen shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specmon.core.code_blocks import code_blocks

if TYPE_CHECKING:
    from specmon.ui.app.screens import ChatScreen


def _last_answer(screen: ChatScreen) -> str | None:
    for turn in reversed(screen.conversation.turns):
        if turn.status != "streaming" and turn.answer:
            return turn.answer
    return None


def copy_answer(screen: ChatScreen, *, code: bool = False) -> tuple[str, bool]:
    """Copy the last finished answer (with `code`, its last code block); (line, failed)."""
    answer = _last_answer(screen)
    if answer is None:
        return "nothing to copy yet: no finished answer", True
    if code:
        blocks = code_blocks(answer)
        if not blocks:
            return "the last answer has no code block", True
        screen.app.copy_to_clipboard(blocks[-1])
        n = blocks[-1].count("\n") + 1
        return f"copied the last code block ({n} line{'s' if n != 1 else ''})", False
    screen.app.copy_to_clipboard(answer)
    return f"copied the last answer ({len(answer)} characters)", False


def edit_last(screen: ChatScreen) -> tuple[str, bool]:
    """Remove the last turn (from the screen, the context and the saved conversation) and put
    its prompt back in the prompt line; Enter sends it again. (line, failed)."""
    from specmon.ui.app.widgets import PromptInput, TurnView

    if screen.feed is not None:
        return "an answer is still streaming (Esc cancels it first)", True
    turns = screen.conversation.turns
    if not turns:
        return "no prompt to edit yet", True
    views = list(screen.query(TurnView))
    turn = turns.pop()
    if len(views) == len(turns) + 1:
        view = views[-1]
        screen.answer_feeds.pop(view.answer, None)
        if screen._settling is not None and screen._settling[1] is view:
            screen._settling = None
        view.remove()
    prompt = screen.query_one("#prompt", PromptInput)
    prompt.value = turn.prompt
    prompt.cursor_position = len(turn.prompt)
    prompt.focus()
    screen.save_conversation()
    return "last turn taken back: edit the prompt, Enter sends it again", False
