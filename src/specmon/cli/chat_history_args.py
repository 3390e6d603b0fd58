"""`specmon chat`'s saved-conversation flags: `--no-save`, `--resume [ID]` and
`--export-chat ID FILE` (docs/chat.md, "Saved conversations"); what they do is
ui/saved_chats.py's.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from specmon.cli.args import fail, server_url
from specmon.ui.saved_chats import HistoryFlags as HistoryFlags

if TYPE_CHECKING:
    from specmon.core.chat_record import SavedConversation


def add_history_arguments(p: Any) -> None:
    p.add_argument(
        "--no-save",
        action="store_true",
        help="do not save this conversation (default: saved under $XDG_DATA_HOME/specmon)",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="reopen a saved conversation: ID, or without it a list to search and pick from; "
        "without --attach/--model it connects to the server the conversation used; a long one "
        "is reopened with its last turns (200, at most 2 MB of text)",
    )
    p.add_argument(
        "--export-chat",
        nargs=2,
        default=None,
        metavar=("ID", "FILE"),
        help="write saved conversation ID as Markdown, with each answer's numbers, to FILE "
        "('-': standard output), then exit",
    )


def history_flags(args: argparse.Namespace) -> HistoryFlags:
    """The saved-conversation flags as given."""
    export = args.export_chat
    return HistoryFlags(
        no_save=bool(args.no_save),
        resume=args.resume,
        export_chat=(str(export[0]), str(export[1])) if export is not None else None,
    )


def saved_server(loaded: SavedConversation) -> tuple[str, str | None] | int:
    """The server a resumed conversation used (URL, model), checked as --attach URL would be;
    the exit code after a one-line error when it has none or a bad one."""
    conversation_id = loaded.id
    if loaded.server.url is None:
        return fail(
            "chat", f"conversation {conversation_id} has no server saved; give --attach URL", 2
        )
    try:
        return server_url(loaded.server.url), loaded.server.model
    except argparse.ArgumentTypeError as exc:
        return fail("chat", f"conversation {conversation_id} has a bad server address: {exc}", 2)
