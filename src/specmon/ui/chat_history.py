"""The chat screen's side of saved conversations: the snapshot it hands the saver after each
answer, the turns of a resumed conversation put back on screen, the Markdown export key, and
the one line shown when saving failed. The chat screen (ui/screens/chat.py) gets its ChatHistory
through its constructor and calls it from a few hooks, handing it a `ChatState` (plain data, so
this module needs nothing of the screen); the writing itself runs in runtime/chat_saver.py's
thread.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from specmon.core.chat_record import (
    SavedConversation,
    SavedNumbers,
    SavedServer,
    SavedSettings,
    SavedTurn,
    scrub,
    title_of,
)
from specmon.core.conversation_export import to_markdown
from specmon.core.redaction import Scrubber
from specmon.core.verdict import VerdictKind
from specmon.ui.answer_numbers import AnswerNumbers
from specmon.ui.conversation import ChatSettings, Turn, TurnStatus
from specmon.ui.widgets.turn import format_numbers

if TYPE_CHECKING:
    from specmon.runtime.chat_saver import ChatSaver
    from specmon.ui.port import ServerSummary

_VERDICTS: dict[str, VerdictKind] = {k: k for k in get_args(VerdictKind)}
"""Every verdict by its saved name (a name this specmon does not know reads back "unjudged")."""
_STATUSES: dict[str, TurnStatus] = {"ok": "ok", "cancelled": "cancelled", "failed": "failed"}


def saved_numbers(n: AnswerNumbers) -> SavedNumbers:
    return SavedNumbers(
        tokens=n.tokens,
        decode_tok_s=n.decode_tok_s,
        ttft_s=n.ttft_s,
        acceptance_length=n.acceptance_length,
        acceptance_rate=n.acceptance_rate,
        al_source=n.al_source,
        verdict=n.flag,
        reasons=n.reasons,
    )


def answer_numbers(n: SavedNumbers) -> AnswerNumbers:
    verdict = _VERDICTS.get(n.verdict or "", "unjudged")
    return AnswerNumbers(
        tokens=n.tokens,
        decode_tok_s=n.decode_tok_s,
        ttft_s=n.ttft_s,
        acceptance_length=n.acceptance_length,
        acceptance_rate=n.acceptance_rate,
        al_source=n.al_source,
        flag=verdict,
        reasons=n.reasons,
    )


def export_name(conversation_id: int | None, now: _dt.datetime | None = None) -> str:
    """Where the export key writes (in the working directory)."""
    now = now or _dt.datetime.now()
    which = str(conversation_id) if conversation_id is not None else "unsaved"
    return os.path.abspath(now.strftime(f"specmon-chat-{which}-%Y%m%d-%H%M%S.md"))


@dataclass(frozen=True)
class ChatState:
    """What the chat screen shows, as plain data: its turns, each turn's numbers as shown (None:
    none yet), the server it talks to, the sampling settings and the system prompt."""

    turns: Sequence[Turn]
    numbers: Sequence[AnswerNumbers | None]
    server: ServerSummary | None
    settings: ChatSettings
    system: str | None


@dataclass(frozen=True)
class RestoredTurn:
    """A saved turn as the screen puts it back: the turn (into the context), its numbers and
    the status line under its answer."""

    turn: Turn
    numbers: AnswerNumbers | None
    line: str
    failed: bool


class ChatHistory:
    """Saving (None saver: `--no-save`) and resuming for one chat screen."""

    def __init__(
        self,
        saver: ChatSaver | None,
        *,
        resumed: SavedConversation | None = None,
        secrets: tuple[str, ...] = (),
        scrubber: Scrubber | None = None,
    ) -> None:
        self.saver = saver
        self.scrubber = scrubber if scrubber is not None else Scrubber.of(secrets)
        """What every text goes through before it is exported (the saver's own, the same)."""
        self.resumed = resumed
        self.created_at = resumed.created_at if resumed is not None else ""

    def snapshot(self, state: ChatState) -> SavedConversation:
        """The conversation as it stands: its finished turns with their numbers, the server,
        the system prompt and the sampling settings."""
        turns: list[SavedTurn] = []
        for i, turn in enumerate(state.turns):
            if turn.status == "streaming":
                continue
            numbers = state.numbers[i] if i < len(state.numbers) else None
            turns.append(
                SavedTurn(
                    prompt=turn.prompt,
                    answer=turn.answer,
                    status=turn.status,
                    error=turn.error,
                    numbers=None if numbers is None else saved_numbers(numbers),
                    system=turn.system,
                )
            )
        server_info = state.server
        if server_info is not None:
            server = SavedServer(
                server_info.url,
                server_info.model,
                server_info.draft_model,
                server_info.n_spec,
                server_info.simulated,
            )
        else:
            server = self.resumed.server if self.resumed is not None else SavedServer()
        s = state.settings
        return SavedConversation(
            turns=tuple(turns),
            server=server,
            settings=SavedSettings(state.system, s.temperature, s.top_p, s.max_tokens),
            id=self.saver.conversation_id if self.saver is not None else None,
            title=title_of(turns),
            created_at=self.created_at,
            first_turn=self.resumed.first_turn if self.resumed is not None else 0,
        )

    def save(self, state: ChatState) -> None:
        """Hand the saver the conversation's newest state (nothing to save: no call)."""
        if self.saver is None:
            return
        if self.saver.conversation_id is None and not any(
            t.status != "streaming" for t in state.turns
        ):
            return  # nothing to save yet (a conversation once saved is saved even emptied)
        if not self.created_at:
            self.created_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.saver.save(self.snapshot(state))

    def notice(self) -> tuple[str, bool] | None:
        """The next line to show about saving, and whether it says something was not saved: a
        save delayed by another program's lock, the conversation kept for the next save, saved
        again, saving stopped (each once)."""
        if self.saver is None:
            return None
        return self.saver.take_notice()

    def restored(self) -> list[RestoredTurn]:
        """A resumed conversation's turns, finished, with their numbers and status lines (none
        when nothing was resumed)."""
        saved = self.resumed
        if saved is None:
            return []
        out = []
        for t in saved.turns:
            status = _STATUSES.get(t.status, "ok")
            turn = Turn(
                t.prompt,
                t.answer,
                status=status,
                error=t.error,
                completion_tokens=t.numbers.tokens if t.numbers is not None else None,
                system=t.system,
            )
            numbers = None if t.numbers is None else answer_numbers(t.numbers)
            line = "" if numbers is None else format_numbers(numbers)
            if status == "cancelled":
                line = "⏹ cancelled — partial answer kept" + (f" · {line}" if line else "")
            elif status == "failed":
                line = f"✗ failed — {t.error or 'the request failed'}"
            out.append(RestoredTurn(turn, numbers, line, status == "failed"))
        return out

    def resumed_line(self) -> str | None:
        """The line the screen shows after putting a resumed conversation back."""
        saved = self.resumed
        if saved is None:
            return None
        n = len(saved.turns)
        if saved.first_turn:
            total = saved.first_turn + n
            return (
                f"conversation {saved.id} holds {saved.stored_chars / 1e6:.1f} MB in {total} "
                f"turns; loaded the last {n} turn{'s' if n != 1 else ''} (--export-chat "
                f"{saved.id} FILE writes it all)"
            )
        return (
            f"resumed conversation {saved.id}: {n} turn{'s' if n != 1 else ''} (saved "
            f"{saved.updated_at or 'earlier'})"
        )

    def export(self, state: ChatState, path: str | None = None) -> str:
        """Write the conversation as Markdown; the line to show (where, or why not)."""
        target = path or export_name(self.saver.conversation_id if self.saver else None)
        snapshot = scrub(self.snapshot(state), self.scrubber)
        if not snapshot.turns:
            return "nothing to export yet: no finished answer"
        try:
            Path(target).write_text(to_markdown(snapshot), encoding="utf-8")
        except OSError as exc:
            return f"export failed: {target}: {exc.strerror or exc}"
        return f"exported to {target}"
