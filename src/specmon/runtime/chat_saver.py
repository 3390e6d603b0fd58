"""Saves the chat's conversation off the UI thread.

The chat screen hands `save()` the whole conversation after each answer (and when its settings
change); a background thread opens the store on first use and writes the newest snapshot only
(snapshots replace each other, so none is lost by skipping one, and the queue cannot grow).

Another program holding the file's write lock (another chat saving a long answer) only delays a
save: each attempt waits the store's busy timeout, then the saver tries again after growing
pauses (RETRY_DELAYS_S), telling the screen once that the save is delayed. When every attempt
found the lock held, the conversation is kept in memory and written with the next save (or at
quit), and the screen says so in one line; a save that then works says so too. Any other failure
(a corrupt or read-only file, a directory in its place, a conversation past the store's size
limits) turns saving off for the session with one line; the chat itself goes on.

Every text is scrubbed before any write (core.chat_record.scrub with the session's
core.redaction.Scrubber: the API key, the environment's tokens, the server URL's password,
`--redact` patterns); each turn is scrubbed once, not again at every save.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from specmon.core.chat_record import SavedConversation, SavedTurn, scrub, scrub_turn
from specmon.core.redaction import Scrubber
from specmon.sources.conversation_store import (
    ConversationStore,
    ConversationStoreBusy,
    ConversationStoreError,
)

CLOSE_TIMEOUT_S = 2.0
"""At quit, the last snapshot's write is waited for at most this long."""
RETRY_DELAYS_S: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
"""The pauses before each new attempt when the file was locked (each attempt itself waits up to
the store's busy timeout, 1 s): about 13 s in all before the snapshot is kept for the next
save."""


class ChatSaver:
    """One conversation's saving: `save(snapshot)` from any thread, never blocking on I/O."""

    def __init__(
        self,
        open_store: Callable[[], ConversationStore],
        *,
        resumed: SavedConversation | None = None,
        secrets: Iterable[str] = (),
        retry_delays: Sequence[float] = RETRY_DELAYS_S,
        scrubber: Scrubber | None = None,
    ) -> None:
        """`scrubber`: what every text goes through before it is written (else one for the
        known `secrets`)."""
        self._open_store = open_store
        self._retry_delays = tuple(retry_delays)
        self._scrubber = scrubber if scrubber is not None else Scrubber.of(secrets)
        self._scrubbed: list[tuple[SavedTurn, SavedTurn]] = []
        """The turns of the last snapshot written, as given and as scrubbed (on the saver's
        thread only)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: SavedConversation | None = None
        self._kept: SavedConversation | None = None
        """A snapshot every attempt found locked: written with the next save or at close."""
        self._closing = False
        self._busy = False
        self._problem: str | None = None
        self._problem_taken = False
        self._notices: deque[tuple[str, bool]] = deque(maxlen=8)
        self._dirty = False
        """The newest snapshot handed in is not written yet."""
        self._said_delayed = False
        """The screen was told a save is delayed or kept: it is told again when one works."""
        self._written: SavedConversation | None = resumed
        self.conversation_id: int | None = resumed.id if resumed is not None else None
        self._thread: threading.Thread | None = None

    @property
    def problem(self) -> str | None:
        """Why saving stopped (one line), None while it works."""
        return self._problem

    @property
    def unsaved(self) -> bool:
        """Whether the newest conversation handed in is not in the file (a save still queued or
        running, one kept after every attempt found the file locked, or saving stopped)."""
        with self._lock:
            return self._dirty

    def take_problem(self) -> str | None:
        """The problem line the first time it is asked for after it happened, else None."""
        with self._lock:
            if self._problem is None or self._problem_taken:
                return None
            self._problem_taken = True
            return self._problem

    def take_notice(self) -> tuple[str, bool] | None:
        """The next line for the screen about saving, and whether it says something was not
        saved: a save delayed by another program's lock, a conversation kept for the next save,
        saved again, saving stopped. None when there is nothing new."""
        with self._lock:
            return self._notices.popleft() if self._notices else None

    def save(self, snapshot: SavedConversation) -> None:
        """Queue the conversation's newest state (replacing one not yet written)."""
        with self._lock:
            if self._problem is not None or self._closing:
                return
            self._pending = snapshot
            self._kept = None  # the newer snapshot holds everything the kept one did
            self._dirty = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="specmon-chat-saver", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def flush(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait until what was queued is written (or failed, or kept for the next save); False
        when `timeout` ran out."""
        with self._wake:
            return self._wake.wait_for(
                lambda: (self._pending is None and not self._busy) or self._problem is not None,
                timeout,
            )

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Write what is queued or kept (waiting at most `timeout`), then stop the thread;
        `unsaved` then says whether the conversation is in the file."""
        with self._lock:
            if self._kept is not None and self._pending is None and self._problem is None:
                self._pending, self._kept = self._kept, None  # one more attempt
                self._wake.notify()
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
                    store = self._write_with_retries(store, snapshot)
                except ConversationStoreError as exc:
                    with self._wake:
                        self._problem = str(exc)
                        self._notices.append((f"chat not saved: {exc}", True))
                        self._busy = False
                        self._wake.notify_all()
                    return
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()
        finally:
            if store is not None:
                store.close()

    def _write_with_retries(
        self, store: ConversationStore | None, snapshot: SavedConversation
    ) -> ConversationStore | None:
        """Write `snapshot` (a newer one queued meanwhile is written instead), trying again
        while the file is locked; keep it for the next save when every attempt found it locked.
        Returns the open store (None when it could not be opened)."""
        delays = iter(self._retry_delays)
        delayed = False  # in this call
        while True:
            try:
                if store is None:
                    store = self._open_store()
                self._write(store, snapshot)
            except ConversationStoreBusy as exc:
                delay = next(delays, None)
                with self._wake:
                    if delay is None or self._closing:
                        self._kept = snapshot if self._pending is None else None
                        self._said_delayed = True
                        self._notices.append(
                            (
                                f"chat not saved yet: {exc}; the conversation is kept and saved "
                                "with the next answer",
                                True,
                            )
                        )
                        return store
                    if not delayed:
                        self._notices.append((f"chat save delayed: {exc}; trying again", False))
                    delayed = self._said_delayed = True
                    self._wake.wait_for(lambda: self._closing, delay)
                    if self._pending is not None:  # a newer snapshot holds this one's turns
                        snapshot, self._pending = self._pending, None
                continue
            with self._lock:
                if self._pending is None:
                    self._dirty = False
                if self._said_delayed:
                    self._said_delayed = False
                    self._notices.append(
                        ("chat saved (it had waited for another program's lock)", False)
                    )
            return store

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
