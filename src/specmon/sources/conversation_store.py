"""Saved chat conversations: an SQLite file, `$XDG_DATA_HOME/specmon/chats.sqlite` (default
`~/.local/share/specmon/chats.sqlite`).

Two tables, `conversations` (server, model, system prompt, sampling settings, times) and `turns`
(prompt, answer, status, the answer's numbers: tokens, tok/s, TTFT, AL, acceptance, verdict, and
the system prompt the turn was sent with), versioned with `PRAGMA user_version` (SCHEMA_VERSION; a
file from a newer specmon is refused, not changed; one of version 1, without the turns' system
prompts, is read as it is and gets the column when first written, its old turns reading as not
recorded). WAL journal, so a reader never waits for the writer; a lock held by another process is
waited for at most `busy_timeout_s` (BUSY_TIMEOUT_S), then ConversationStoreBusy (the saver tries
again later). Bounded: at most MAX_CONVERSATIONS (the least recently updated are deleted),
MAX_TURNS turns and MAX_CONVERSATION_CHARS characters each (a save past either raises
ConversationFullError), MAX_TEXT_CHARS characters per text. `load(..., last_turns, last_chars)`
reads the end of a long conversation only (what `--resume` puts back on screen); saving such a
part writes from its first turn on and leaves the earlier turns as they are.

Opened without `create` (listing, `--resume`, `--export-chat`) the file is opened read-only
(`mode=ro`), and where its directory is not writable (a read-only file system, a 0555 directory)
also `immutable=1`: SQLite cannot make the `-shm` file a WAL reader needs there.

Every failure (not a database, a directory in its place, read-only, locked, a newer schema)
raises ConversationStoreError with one line naming the file; the file is never replaced or
repaired. The caller never passes an API key: what it saves went through core's `scrub`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path

from specmon.core.chat_record import (
    ConversationSummary,
    SavedConversation,
    SavedNumbers,
    SavedServer,
    SavedSettings,
    SavedTurn,
    title_of,
)
from specmon.core.numbers import as_float
from specmon.sources.data_files import data_path

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 1.0
"""How long one attempt waits for another program's write lock (SQLite's busy handler, which
backs off by itself); the chat saver then tries again (runtime/chat_saver.py)."""
MAX_CONVERSATIONS = 1000
MAX_TURNS = 2000
MAX_TEXT_CHARS = 1_000_000
"""About 1 MB of text per prompt, answer or system prompt; longer text is cut with a note."""
MAX_CONVERSATION_CHARS = 32_000_000
"""About 32 MB of text (prompts, answers, errors and the system prompts) in one conversation: a
save past it is refused with one line (the chat goes on; a new chat saves again)."""
RESUME_TURNS = 200
RESUME_CHARS = 2_000_000
"""`--resume` puts back the last RESUME_TURNS turns, and fewer where they hold more than
RESUME_CHARS characters (always the last one): a long conversation opens in a second, with a
line saying how much it holds."""
LIST_LIMIT = 200
"""The list screen shows at most this many conversations (newest first)."""

_SCHEMA = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    server_url TEXT,
    model TEXT,
    draft_model TEXT,
    n_spec INTEGER,
    simulated INTEGER NOT NULL DEFAULT 0,
    system TEXT,
    temperature REAL,
    top_p REAL,
    max_tokens INTEGER
);
CREATE TABLE turns (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    answer TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    has_numbers INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER,
    decode_tok_s REAL,
    ttft_s REAL,
    acceptance_length REAL,
    acceptance_rate REAL,
    al_source TEXT,
    verdict TEXT,
    reasons TEXT,
    system TEXT,
    PRIMARY KEY (conversation_id, idx)
);
CREATE INDEX conversations_updated ON conversations(updated_at);
"""


class ConversationStoreError(Exception):
    """The conversation file cannot be used; the message is one line naming the file."""


class ConversationStoreBusy(ConversationStoreError):
    """Another program held the write lock longer than the busy timeout (worth trying again)."""


class ConversationFullError(ConversationStoreError):
    """The conversation would hold more than MAX_TURNS turns or MAX_CONVERSATION_CHARS
    characters: not saved (trying again does not help)."""


_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)


def _store_error(path: Path, exc: BaseException) -> ConversationStoreError:
    """The one-line error for an SQLite or OS error; ConversationStoreBusy for a held lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    kind = ConversationStoreBusy if code is not None and code & 0xFF in _BUSY_CODES else None
    return (kind or ConversationStoreError)(f"chat history {path}: {_one_line(exc)}")


def _read_only_uri(path: Path, *, immutable: bool) -> str:
    return path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")


def _directory_writable(path: Path) -> bool:
    """Whether SQLite can make the file's `-shm` beside it (a read-only open of a WAL file
    needs it, unless it is there already)."""
    if path.with_name(path.name + "-shm").exists():
        return True
    return os.access(path.parent, os.W_OK)


def _texts(turns: tuple[SavedTurn, ...]) -> int:
    """The characters a conversation's turns hold, as written (each text cut)."""
    return sum(
        min(len(t.prompt), MAX_TEXT_CHARS)
        + min(len(t.answer), MAX_TEXT_CHARS)
        + (0 if t.error is None else min(len(t.error), MAX_TEXT_CHARS))
        + (0 if t.system is None else min(len(t.system), MAX_TEXT_CHARS))
        for t in turns
    )


def megabytes(chars: int) -> str:
    """Characters of text as MB for a line (a character taken as a byte)."""
    return f"{chars / 1e6:.1f} MB"


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/specmon/chats.sqlite`, with XDG's default `~/.local/share`."""
    return data_path("chats.sqlite", env)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + "\n\n[cut: longer than specmon saves]"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class ConversationStore:
    """An open conversation file. Use from one thread at a time (the chat saver's thread, or the
    list screen's worker)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        create: bool = True,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> None:
        """Open (and with `create`, make) the file; ConversationStoreError when it cannot be
        used. Without `create` a missing file reads as empty (nothing is written) and the file
        is opened read-only."""
        self.path = path if path is not None else default_path()
        self._db: sqlite3.Connection | None = None
        self._version = SCHEMA_VERSION
        self._earlier: dict[tuple[int, int], int] = {}
        """The characters held by a conversation's turns before a first turn (saving a part)."""
        if not create and not self.path.exists():
            return
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                if not self.path.exists():
                    # Private from the start: conversations are the user's text.
                    with contextlib.suppress(FileExistsError):  # another specmon made it
                        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            if self.path.is_dir():
                raise ConversationStoreError(f"{self.path} is a directory, not a database")
            if create:
                uri = self.path.resolve().as_uri()
            else:  # immutable: SQLite cannot make the -shm file a WAL reader needs there
                uri = _read_only_uri(self.path, immutable=not _directory_writable(self.path))
            db = sqlite3.connect(
                uri,
                uri=True,
                timeout=busy_timeout_s,
                check_same_thread=False,
                isolation_level=None,  # transactions are explicit (BEGIN IMMEDIATE)
            )
            self._db = db
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConversationStoreError(
                    f"chat history {self.path} was written by a newer specmon (schema "
                    f"{version}, this one knows {SCHEMA_VERSION}); it was left as it is"
                )
            db.execute("PRAGMA foreign_keys = ON")
            if create:
                with contextlib.suppress(sqlite3.OperationalError):  # read-only: no WAL switch
                    db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                if version == 0:
                    self._create_schema(db)
                    version = SCHEMA_VERSION
            self._version = version
            if create and version == 1:
                # Best now; where the file is locked or read-only, save tries again (and says why).
                with contextlib.suppress(sqlite3.OperationalError):
                    self._upgrade_from_1(db)
        except ConversationStoreError:
            self.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise _store_error(self.path, exc) from None

    def _create_schema(self, db: sqlite3.Connection) -> None:
        """Create the tables, under the write lock: a second specmon creating the same new file
        at the same moment finds them made (same version) instead of a foreign file."""
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                db.execute("COMMIT")
                return
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise ConversationStoreError(
                    f"chat history {self.path} is an SQLite file but not specmon's; it was left "
                    "as it is"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise

    def _upgrade_from_1(self, db: sqlite3.Connection) -> None:
        """Version 1 to 2: the turns' system prompts (NULL for the turns already saved: not
        recorded), under the write lock (another specmon may be upgrading the same file). Only
        on a file opened for writing; sqlite3.OperationalError where it cannot be written now
        (read-only, or locked past the busy timeout), and the file stays version 1."""
        with _transaction(db):
            if db.execute("PRAGMA user_version").fetchone()[0] == 1:
                db.execute("ALTER TABLE turns ADD COLUMN system TEXT")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._version = SCHEMA_VERSION

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[sqlite3.Connection | None]:
        try:
            yield self._db
        except ConversationStoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise _store_error(self.path, exc) from None

    # ------------------------------------------------------------------ writing

    def save(
        self, conversation: SavedConversation, *, previous: SavedConversation | None = None
    ) -> int:
        """Write the conversation (a new one when its id is None) and return its id. Turns equal
        to `previous`'s (what was written last time) are not written again. A conversation
        resumed in part (`first_turn` > 0) is written from its first turn on; the turns before
        it and its title stay. ConversationFullError past MAX_TURNS turns or
        MAX_CONVERSATION_CHARS characters (nothing is written)."""
        with self._errors() as db:
            if db is None:
                raise ConversationStoreError(f"chat history {self.path} is not open for writing")
            if self._version < SCHEMA_VERSION:  # a version 1 file not upgraded when opened
                self._upgrade_from_1(db)  # a held lock: ConversationStoreBusy, tried again
            c = conversation
            now = _now()
            s, st = c.server, c.settings
            turns = c.turns
            first = c.first_turn if c.id is not None else 0
            whole = first == 0
            if previous is not None and previous.first_turn != first:
                previous = None
            settings_values = (
                s.url,
                s.model,
                s.draft_model,
                s.n_spec,
                int(s.simulated),
                None if st.system is None else _cut(st.system),
                st.temperature,
                st.top_p,
                st.max_tokens,
            )
            self._check_size(db, c, first)
            with _transaction(db):
                if c.id is None:
                    cur = db.execute(
                        "INSERT INTO conversations (title, created_at, updated_at, server_url, "
                        "model, draft_model, n_spec, simulated, system, temperature, top_p, "
                        "max_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (title_of(turns), c.created_at or now, now, *settings_values),
                    )
                    conv_id = cur.lastrowid
                    assert conv_id is not None
                    previous = None
                else:
                    conv_id = c.id
                    db.execute(
                        "UPDATE conversations SET title = CASE WHEN ? THEN ? ELSE title END, "
                        "updated_at = ?, server_url = ?, model = ?, draft_model = ?, n_spec = ?, "
                        "simulated = ?, system = ?, temperature = ?, top_p = ?, max_tokens = ? "
                        "WHERE id = ?",
                        (whole, title_of(turns), now, *settings_values, conv_id),
                    )
                old = previous.turns if previous is not None else ()
                for i, turn in enumerate(turns):
                    if i < len(old) and old[i] == turn:
                        continue
                    db.execute(
                        "INSERT OR REPLACE INTO turns VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (conv_id, first + i, *_turn_values(turn)),
                    )
                db.execute(
                    "DELETE FROM turns WHERE conversation_id = ? AND idx >= ?",
                    (conv_id, first + len(turns)),
                )
                if c.id is None:
                    self._prune(db)
            return conv_id

    def _check_size(self, db: sqlite3.Connection, c: SavedConversation, first: int) -> None:
        """ConversationFullError when the conversation would hold more than MAX_TURNS turns or
        MAX_CONVERSATION_CHARS characters (the turns before `first` counted from the file)."""
        which = "this conversation" if c.id is None else f"conversation {c.id}"
        count = first + len(c.turns)
        if count > MAX_TURNS:
            raise ConversationFullError(
                f"{which} would hold {count} turns, more than the {MAX_TURNS} a saved "
                "conversation may hold; not saved (a new chat is saved again)"
            )
        chars = _texts(c.turns) + min(len(c.settings.system or ""), MAX_TEXT_CHARS)
        if first and c.id is not None:
            key = (c.id, first)
            if key not in self._earlier:
                self._earlier[key] = _held(db, self._version, c.id, first)
            chars += self._earlier[key]
        if chars > MAX_CONVERSATION_CHARS:
            raise ConversationFullError(
                f"{which} would hold {megabytes(chars)} of text, more than the "
                f"{megabytes(MAX_CONVERSATION_CHARS)} a saved conversation may hold; not saved "
                "(a new chat is saved again)"
            )

    def _prune(self, db: sqlite3.Connection) -> None:
        db.execute(
            "DELETE FROM conversations WHERE id NOT IN (SELECT id FROM conversations ORDER BY "
            "updated_at DESC, id DESC LIMIT ?)",
            (MAX_CONVERSATIONS,),
        )

    def delete(self, conversation_id: int) -> None:
        with self._errors() as db:
            if db is not None:
                with _transaction(db):
                    db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # ------------------------------------------------------------------ reading

    def search(self, text: str = "", *, limit: int = LIST_LIMIT) -> list[ConversationSummary]:
        """The conversations whose title, model, prompts or answers contain `text` (any case),
        most recently updated first; all of them (up to `limit`) when `text` is blank."""
        with self._errors() as db:
            if db is None:
                return []
            where, params = "", tuple[str, ...]()
            needle = text.strip()
            if needle:
                pattern = (
                    "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                )
                where = (
                    "WHERE c.title LIKE ? ESCAPE '\\' OR c.model LIKE ? ESCAPE '\\' OR EXISTS "
                    "(SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND (t.prompt LIKE ? "
                    "ESCAPE '\\' OR t.answer LIKE ? ESCAPE '\\'))"
                )
                params = (pattern,) * 4
            rows = db.execute(
                "SELECT c.id, c.title, c.model, c.server_url, c.updated_at, (SELECT count(*) "
                f"FROM turns t WHERE t.conversation_id = c.id) FROM conversations c {where} "
                "ORDER BY c.updated_at DESC, c.id DESC LIMIT ?",
                (*params, max(0, limit)),
            ).fetchall()
            return [ConversationSummary(*row) for row in rows]

    def load(
        self,
        conversation_id: int,
        *,
        last_turns: int | None = None,
        last_chars: int | None = None,
    ) -> SavedConversation:
        """One conversation with all its turns, or with `last_turns` / `last_chars` only its
        last turns (at most that many, holding at most that many characters, and always the
        last one): `first_turn` says where they start and `stored_chars` what the whole holds.
        ConversationStoreError when there is none."""
        with self._errors() as db:
            row = None
            if db is not None:
                row = db.execute(
                    "SELECT id, title, created_at, updated_at, server_url, model, draft_model, "
                    "n_spec, simulated, system, temperature, top_p, max_tokens FROM "
                    "conversations WHERE id = ?",
                    (conversation_id,),
                ).fetchone()
            if db is None or row is None:
                raise ConversationStoreError(
                    f"no saved conversation {conversation_id} in {self.path}"
                )
            system = "system" if self._version >= 2 else "NULL"  # a version 1 file, read only
            first, held = 0, 0
            if last_turns is not None or last_chars is not None:
                first, held = _tail(db, self._version, conversation_id, last_turns, last_chars)
            turns = db.execute(
                "SELECT prompt, answer, status, error, has_numbers, tokens, decode_tok_s, ttft_s, "
                f"acceptance_length, acceptance_rate, al_source, verdict, reasons, {system} "
                "FROM turns WHERE conversation_id = ? AND idx >= ? ORDER BY idx",
                (conversation_id, first),
            ).fetchall()
        return SavedConversation(
            turns=tuple(_turn_from(t) for t in turns),
            server=SavedServer(row[4], row[5], row[6], row[7], bool(row[8])),
            settings=SavedSettings(row[9], row[10], row[11], row[12]),
            id=row[0],
            title=row[1],
            created_at=row[2],
            updated_at=row[3],
            first_turn=first,
            stored_chars=held if first else 0,
        )


def _turn_chars(version: int) -> str:
    """SQL for the characters one turn holds (its system prompt from version 2 on)."""
    chars = "length(prompt) + length(answer) + coalesce(length(error), 0)"
    return chars + (" + coalesce(length(system), 0)" if version >= 2 else "")


def _held(db: sqlite3.Connection, version: int, conversation_id: int, before: int) -> int:
    """The characters of a conversation's turns before index `before`."""
    row = db.execute(
        f"SELECT coalesce(sum({_turn_chars(version)}), 0) FROM turns "
        "WHERE conversation_id = ? AND idx < ?",
        (conversation_id, before),
    ).fetchone()
    return int(row[0])


def _tail(
    db: sqlite3.Connection,
    version: int,
    conversation_id: int,
    turns: int | None,
    chars: int | None,
) -> tuple[int, int]:
    """The index of the first of a conversation's last turns (at most `turns` of them, holding
    at most `chars` characters, at least the last one) and the characters the whole holds. Only
    the lengths are read, newest first."""
    first = 0
    kept = taken = held = 0
    taking = True
    for idx, size in db.execute(
        f"SELECT idx, {_turn_chars(version)} FROM turns WHERE conversation_id = ? "
        "ORDER BY idx DESC",
        (conversation_id,),
    ):
        held += size
        if (
            taking
            and kept
            and (
                (turns is not None and kept >= turns)
                or (chars is not None and taken + size > chars)
            )
        ):
            taking = False
        if taking:
            first, kept, taken = idx, kept + 1, taken + size
    return first, held


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taking the write lock at once (no upgrade from a read lock, which
    WAL could refuse with SQLITE_BUSY without waiting); rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _turn_values(turn: SavedTurn) -> tuple[object, ...]:
    n = turn.numbers
    numbers: tuple[object, ...] = (0,) + (None,) * 8
    if n is not None:
        numbers = (
            1,
            n.tokens,
            n.decode_tok_s,
            n.ttft_s,
            n.acceptance_length,
            n.acceptance_rate,
            n.al_source,
            n.verdict,
            "\n".join(r.replace("\n", " ") for r in n.reasons),
        )
    error = None if turn.error is None else _cut(turn.error)
    system = None if turn.system is None else _cut(turn.system)
    return (_cut(turn.prompt), _cut(turn.answer), turn.status, error, *numbers, system)


def _turn_from(row: tuple[object, ...]) -> SavedTurn:
    (prompt, answer, status, error, has_numbers, tokens, tok_s, ttft, al, rate, source) = row[:11]
    verdict, reasons = row[11], row[12]
    numbers = None
    if has_numbers:
        numbers = SavedNumbers(
            tokens=tokens if isinstance(tokens, int) else None,
            decode_tok_s=as_float(tok_s),
            ttft_s=as_float(ttft),
            acceptance_length=as_float(al),
            acceptance_rate=as_float(rate),
            al_source=source if isinstance(source, str) else None,
            verdict=verdict if isinstance(verdict, str) else "unjudged",
            reasons=tuple(reasons.split("\n")) if isinstance(reasons, str) and reasons else (),
        )
    return SavedTurn(
        prompt=str(prompt),
        answer=str(answer),
        status=str(status),
        error=error if isinstance(error, str) else None,
        numbers=numbers,
        system=row[13] if len(row) > 13 and isinstance(row[13], str) else None,
    )
