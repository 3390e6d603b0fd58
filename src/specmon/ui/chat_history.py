"""The chat screen's side of saved conversations: the snapshot it hands the saver after each
answer, the turns of a resumed conversation put back on screen, the Markdown export key, and
the one line shown when saving failed. The screen calls these from a few hooks
(ui/app/screens.py); the writing itself runs in runtime/chat_saver.py's thread.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from specmon.runtime.chat_saver import ChatSaver
    from specmon.ui.app.screens import ChatScreen
    from specmon.ui.app.session_port import AnswerNumbers

_VERDICTS = ("ok", "transition", "vanilla", "failed", "unjudged")


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
    from specmon.ui.app.session_port import AnswerNumbers

    verdict = n.verdict if n.verdict in _VERDICTS else "unjudged"
    return AnswerNumbers(
        tokens=n.tokens,
        decode_tok_s=n.decode_tok_s,
        ttft_s=n.ttft_s,
        acceptance_length=n.acceptance_length,
        acceptance_rate=n.acceptance_rate,
        al_source=n.al_source,
        flag=verdict,  # type: ignore[arg-type]
        reasons=n.reasons,
    )


def export_name(conversation_id: int | None, now: _dt.datetime | None = None) -> str:
    """Where the export key writes (in the working directory)."""
    now = now or _dt.datetime.now()
    which = str(conversation_id) if conversation_id is not None else "unsaved"
    return os.path.abspath(now.strftime(f"specmon-chat-{which}-%Y%m%d-%H%M%S.md"))


class ChatHistory:
    """Saving (None saver: `--no-save`) and resuming for one chat screen."""

    def __init__(
        self,
        saver: ChatSaver | None,
        *,
        resumed: SavedConversation | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.saver = saver
        self.secrets = secrets
        """Known secret values (the API key in use), scrubbed from what is exported."""
        self.resumed = resumed
        self.created_at = resumed.created_at if resumed is not None else ""

    def snapshot(self, screen: ChatScreen) -> SavedConversation:
        """The screen's conversation as it stands: its finished turns with their numbers, the
        server, the system prompt and the sampling settings."""
        from specmon.ui.app.widgets import TurnView

        views = list(screen.query(TurnView))
        turns: list[SavedTurn] = []
        for i, turn in enumerate(screen.conversation.turns):
            if turn.status == "streaming":
                continue
            numbers = views[i].answer.numbers if i < len(views) else None
            turns.append(
                SavedTurn(
                    prompt=turn.prompt,
                    answer=turn.answer,
                    status=turn.status,
                    error=turn.error,
                    numbers=None if numbers is None else saved_numbers(numbers),
                )
            )
        server_info = screen.port.server
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
        s = screen.settings
        return SavedConversation(
            turns=tuple(turns),
            server=server,
            settings=SavedSettings(
                screen.conversation.system, s.temperature, s.top_p, s.max_tokens
            ),
            id=self.saver.conversation_id if self.saver is not None else None,
            title=title_of(turns),
            created_at=self.created_at,
        )

    def save(self, screen: ChatScreen) -> None:
        """Hand the saver the conversation's newest state (nothing to save: no call)."""
        if self.saver is None:
            return
        if self.saver.conversation_id is None and not any(
            t.status != "streaming" for t in screen.conversation.turns
        ):
            return  # nothing to save yet (a conversation once saved is saved even emptied)
        if not self.created_at:
            self.created_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.saver.save(self.snapshot(screen))

    def problem(self) -> str | None:
        """The one line to show once when saving stopped working."""
        if self.saver is None:
            return None
        problem = self.saver.take_problem()
        return None if problem is None else f"chat not saved: {problem}"

    def restore(self, screen: ChatScreen) -> None:
        """Put a resumed conversation's turns back on screen (finished, with their numbers) and
        into the context and the prompt history."""
        from specmon.ui.app.conversation import Turn
        from specmon.ui.app.widgets import PromptInput, TurnView, format_numbers

        saved = self.resumed
        if saved is None:
            return
        prompt_input = screen.query_one("#prompt", PromptInput)
        views = []
        for t in saved.turns:
            status = t.status if t.status in ("ok", "cancelled", "failed") else "ok"
            turn = Turn(
                t.prompt,
                t.answer,
                status=status,  # type: ignore[arg-type]
                error=t.error,
                completion_tokens=t.numbers.tokens if t.numbers is not None else None,
            )
            screen.conversation.turns.append(turn)
            view = TurnView(t.prompt)
            view.answer.append(t.answer)
            line = ""
            if t.numbers is not None:
                view.answer.numbers = answer_numbers(t.numbers)
                line = format_numbers(view.answer.numbers)
            if status == "cancelled":
                line = "⏹ cancelled — partial answer kept" + (f" · {line}" if line else "")
            elif status == "failed":
                line = f"✗ failed — {t.error or 'the request failed'}"
            view.answer.finish(line, failed=status == "failed")
            views.append(view)
            prompt_input.remember(t.prompt)
        if views:
            screen.query_one("#conversation").mount(*views)
        n = len(saved.turns)
        screen._notice(
            f"resumed conversation {saved.id}: {n} turn{'s' if n != 1 else ''} (saved "
            f"{saved.updated_at or 'earlier'})"
        )

    def export(self, screen: ChatScreen, path: str | None = None) -> str:
        """Write the conversation as Markdown; the line to show (where, or why not)."""
        target = path or export_name(self.saver.conversation_id if self.saver else None)
        snapshot = scrub(self.snapshot(screen), self.secrets)
        if not snapshot.turns:
            return "nothing to export yet: no finished answer"
        try:
            Path(target).write_text(to_markdown(snapshot), encoding="utf-8")
        except OSError as exc:
            return f"export failed: {target}: {exc.strerror or exc}"
        return f"exported to {target}"
