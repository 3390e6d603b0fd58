"""Saves the chat's conversation off the UI thread.

The chat screen hands `save()` the whole conversation after each answer (and when its settings
change); a background thread opens the store on first use and writes the newest snapshot only
(snapshots replace each other, so none is lost by skipping one, and the queue cannot grow).
The first failure (a corrupt or read-only file, a directory in its place, a lock held too long)
turns saving off for the session and leaves one line in `problem` for the screen to show; the
chat itself goes on. Every text is scrubbed before any write (core.chat_record.scrub with the
session's core.redaction.Scrubber: the API key, the environment's tokens, the server URL's
password, `--redact` patterns); each turn is scrubbed once, not again at every save.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

from specmon.core.chat_record import SavedConversation, SavedTurn, scrub, scrub_turn
from specmon.core.redaction import Scrubber
from specmon.sources.conversation_store import ConversationStore, ConversationStoreError

CLOSE_TIMEOUT_S = 2.0
"""At quit, the last snapshot's write is waited for at most this long."""


class ChatSaver:
    """One conversation's saving: `save(snapshot)` from any thread, never blocking on I/O."""

    def __init__(
        self,
        open_store: Callable[[], ConversationStore],
        *,
        resumed: SavedConversation | None = None,
        secrets: Iterable[str] = (),
        scrubber: Scrubber | None = None,
    ) -> None:
        """`scrubber`: what every text goes through before it is written (else one for the
        known `secrets`)."""
        self._open_store = open_store
        self._scrubber = scrubber if scrubber is not None else Scrubber.of(secrets)
        self._scrubbed: list[tuple[SavedTurn, SavedTurn]] = []
        """The turns of the last snapshot written, as given and as scrubbed (on the saver's
        thread only)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: SavedConversation | None = None
        self._closing = False
        self._busy = False
        self._problem: str | None = None
        self._problem_taken = False
        self._written: SavedConversation | None = resumed
        self.conversation_id: int | None = resumed.id if resumed is not None else None
        self._thread: threading.Thread | None = None

    @property
    def problem(self) -> str | None:
        """Why saving stopped (one line), None while it works."""
        return self._problem

    def take_problem(self) -> str | None:
        """The problem line the first time it is asked for after it happened, else None."""
        with self._lock:
            if self._problem is None or self._problem_taken:
                return None
            self._problem_taken = True
            return self._problem

    def save(self, snapshot: SavedConversation) -> None:
        """Queue the conversation's newest state (replacing one not yet written)."""
        with self._lock:
            if self._problem is not None or self._closing:
                return
            self._pending = snapshot
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="specmon-chat-saver", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def flush(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait until what was queued is written (or failed); False when `timeout` ran out."""
        with self._wake:
            return self._wake.wait_for(
                lambda: (self._pending is None and not self._busy) or self._problem is not None,
                timeout,
            )

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Write what is queued (waiting at most `timeout`), then stop the thread."""
        self.flush(timeout)
        with self._lock:
            self._closing = True
            self._wake.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        store: ConversationStore | None = None
        try:
            while True:
                with self._wake:
                    self._wake.wait_for(lambda: self._pending is not None or self._closing)
                    snapshot = self._pending
                    self._pending = None
                    if snapshot is None:
                        return
                    self._busy = True
                try:
                    if store is None:
                        store = self._open_store()
                    self._write(store, snapshot)
                except ConversationStoreError as exc:
                    with self._wake:
                        self._problem = str(exc)
                        self._busy = False
                        self._wake.notify_all()
                    return
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()
        finally:
            if store is not None:
                store.close()

    def _write(self, store: ConversationStore, snapshot: SavedConversation) -> None:
        clean = scrub(
            replace(snapshot, id=self.conversation_id),
            self._scrubber,
            turns=self._scrub_turns(snapshot.turns),
        )
        self.conversation_id = store.save(clean, previous=self._written)
        self._written = replace(clean, id=self.conversation_id)

    def _scrub_turns(self, turns: tuple[SavedTurn, ...]) -> tuple[SavedTurn, ...]:
        """The turns scrubbed, reusing the last snapshot's for the turns that did not change
        (an answer is scrubbed once, not at every later answer's save)."""
        done = self._scrubbed
        out = [
            done[i][1] if i < len(done) and done[i][0] == turn else scrub_turn(turn, self._scrubber)
            for i, turn in enumerate(turns)
        ]
        self._scrubbed = list(zip(turns, out, strict=True))
        return tuple(out)
