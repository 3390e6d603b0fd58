"""`specmon chat`'s saved conversations, wired for a chat (its flags: cli/chat_history_args.py):
the scrubber every saved or exported text goes through, `--export-chat`, the conversation
`--resume` names or the user picks, the chat screen's saving (`ChatHistory`) and its close
(docs/chat.md, "Saved conversations").

Conversations go to `$XDG_DATA_HOME/specmon/chats.sqlite` (sources/conversation_store.py). A
database that cannot be used never stops a chat: the chat screen says so in one line and goes
on unsaved (a conversation still not saved at quit is named on stderr). `--resume` and
`--export-chat` only read it (read-only, also on a read-only file system) and fail with one line
and exit 1. `--resume` puts back the last turns of a long conversation only (RESUME_TURNS,
RESUME_CHARS), with a line saying how much it holds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.runtime.one_line import fail

if TYPE_CHECKING:
    from specmon.core.chat_record import SavedConversation
    from specmon.core.redaction import Scrubber
    from specmon.ui.chat_history import ChatHistory


@dataclass(frozen=True, slots=True)
class HistoryFlags:
    """The saved-conversation flags as given (the one declaration of what they hold)."""

    no_save: bool = False
    resume: str | None = None
    """`--resume [ID]`: the ID as typed, "" for the list, None when not given."""
    export_chat: tuple[str, str] | None = None
    """`--export-chat ID FILE`."""


def _fail(message: str, code: int = 1) -> int:
    return fail("chat", message, code)


def _secrets(api_key: str | None) -> tuple[str, ...]:
    """Every key value this process knows (the flag, and both environment variables)."""
    from specmon.core.credentials import API_KEY_ENV_VARS

    values = [api_key or ""] + [os.environ.get(name, "") for name in API_KEY_ENV_VARS]
    return tuple(v for v in values if v)


def chat_scrubber(
    api_key: str | None, urls: Sequence[str | None], redact: Sequence[str]
) -> Scrubber:
    """What every saved or exported text goes through: the API keys, the environment's token
    values (HF_TOKEN, any *_TOKEN, *_KEY, *_SECRET, *_PASSWORD), the passwords of the URLs
    given, and the --redact patterns (core.redaction.Scrubber)."""
    from specmon.core.redaction import Scrubber

    return Scrubber.of(_secrets(api_key), urls=list(urls), environ=os.environ, redact=redact)


def _conversation_id(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


def _load(conversation_id: int, *, last_part: bool = False) -> SavedConversation | str:
    """The conversation (with `last_part`: its last turns only, as `--resume` shows them), or
    the one line saying why not."""
    from specmon.sources import conversation_store as cs

    try:
        with cs.ConversationStore(create=False) as store:
            if last_part:
                return store.load(
                    conversation_id, last_turns=cs.RESUME_TURNS, last_chars=cs.RESUME_CHARS
                )
            return store.load(conversation_id)
    except cs.ConversationStoreError as exc:
        return str(exc)


def export_chat(export: tuple[str, str], scrubber: Scrubber) -> int:
    """`--export-chat ID FILE`: 0 written, 1 not found or not written, 2 a bad ID."""
    from specmon.core.chat_record import scrub
    from specmon.core.conversation_export import to_markdown

    text_id, target = export
    conversation_id = _conversation_id(text_id)
    if conversation_id is None:
        return _fail(f"--export-chat ID must be a conversation number, got {text_id!r}", 2)
    loaded = _load(conversation_id)
    if isinstance(loaded, str):
        return _fail(loaded)
    markdown = to_markdown(scrub(loaded, scrubber))
    if target == "-":
        sys.stdout.write(markdown)
        return 0
    try:
        with open(target, "w", encoding="utf-8") as out:
            out.write(markdown)
    except OSError as exc:
        return _fail(f"cannot write {target}: {exc.strerror or exc}")
    print(f"conversation {conversation_id} written to {target}", file=sys.stderr)
    return 0


def pick_resumed(resume: str) -> SavedConversation | int | None:
    """The conversation `--resume` names (`resume`: its ID as typed) or the user picks from the
    list (`resume` ""); None: none picked; or the exit code after a one-line error."""
    if resume:
        conversation_id = _conversation_id(resume)
        if conversation_id is None:
            return _fail(f"--resume ID must be a conversation number, got {resume!r}", 2)
    else:
        from specmon.runtime.terminal import on_terminal

        if not on_terminal():
            return _fail(
                "--resume without an ID needs a terminal for the list: give --resume ID",
                2,
            )
        from specmon.sources.conversation_store import ConversationStore
        from specmon.ui.screens.conversations import ConversationsApp

        def search(text: str) -> list[Any]:
            with ConversationStore(create=False) as store:
                return store.search(text)

        chosen = ConversationsApp(search).run()
        if chosen is None:
            return None
        conversation_id = chosen
    loaded = _load(conversation_id, last_part=True)
    if isinstance(loaded, str):
        return _fail(loaded)
    return loaded


def chat_history_for(
    no_save: bool, resumed: SavedConversation | None, scrubber: Scrubber
) -> ChatHistory:
    """The chat screen's saving (none with --no-save) and resumed conversation; nothing is
    opened until the first answer is saved."""
    from specmon.runtime.chat_saver import ChatSaver
    from specmon.sources.conversation_store import ConversationStore
    from specmon.ui.chat_history import ChatHistory

    saver = None
    if not no_save:
        saver = ChatSaver(ConversationStore, resumed=resumed, scrubber=scrubber)
    return ChatHistory(saver, resumed=resumed, scrubber=scrubber)


def close_history(history: ChatHistory | None) -> None:
    """Write what is still queued or kept (bounded wait) before the process exits; a
    conversation that is still not in the file is named on stderr (one line)."""
    if history is None or history.saver is None:
        return
    saver = history.saver
    saver.close()
    if saver.unsaved:
        which = f"conversation {saver.conversation_id}" if saver.conversation_id else "the chat"
        why = saver.problem or "the chat history stayed locked by another program"
        print(f"specmon chat: the last answers of {which} were not saved: {why}", file=sys.stderr)
