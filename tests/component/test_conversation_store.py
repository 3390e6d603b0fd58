"""The SQLite conversation store and the background saver: round trip, schema version, bounds,
search, and every way the file can be unusable (one-line error, file left as it was)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from specmon.core.chat_record import (
    SavedConversation,
    SavedNumbers,
    SavedServer,
    SavedSettings,
    SavedTurn,
)
from specmon.runtime.chat_saver import ChatSaver
from specmon.sources import conversation_store as cs
from specmon.sources.conversation_store import (
    ConversationFullError,
    ConversationStore,
    ConversationStoreError,
)
from specmon.ui.chat_history import ChatHistory
from specmon.ui.saved_chats import close_history

NUMBERS = SavedNumbers(
    tokens=13,
    decode_tok_s=200.0,
    ttft_s=0.1,
    acceptance_length=4.0,
    acceptance_rate=0.375,
    al_source="chunks",
    verdict="vanilla",
    reasons=("decode 20 tok/s is within 5% of the vanilla 21 tok/s", "AL 1.02"),
)


def conversation(*prompts: str, model: str = "m") -> SavedConversation:
    return SavedConversation(
        turns=tuple(SavedTurn(p, f"answer to {p}", numbers=NUMBERS) for p in prompts),
        server=SavedServer("http://127.0.0.1:8000", model, "d", 8, True),
        settings=SavedSettings("be brief", 0.3, 0.8, 64),
    )


def test_a_conversation_round_trips_with_numbers_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "specmon" / "chats.sqlite"
    with ConversationStore(path) as store:
        conv = conversation("one", "two")
        failed = SavedTurn("three", "part", status="failed", error="HTTP 500", numbers=None)
        conv = SavedConversation((*conv.turns, failed), conv.server, conv.settings)
        cid = store.save(conv)
    with ConversationStore(path, create=False) as store:
        loaded = store.load(cid)
    assert loaded.id == cid
    assert loaded.turns == conv.turns
    assert loaded.server == conv.server
    assert loaded.settings == conv.settings
    assert loaded.title == "one"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == cs.SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_saving_again_updates_changed_turns_and_removes_extra_ones(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite") as store:
        first = conversation("one", "two")
        cid = store.save(first)
        changed = SavedConversation(
            (first.turns[0], SavedTurn("two", "edited")),
            first.server,
            SavedSettings(None, 1.0, None, None),
            id=cid,
        )
        assert store.save(changed, previous=first) == cid
        assert store.load(cid).turns == changed.turns
        assert store.load(cid).settings == changed.settings
        shorter = SavedConversation(changed.turns[:1], first.server, id=cid)
        store.save(shorter, previous=changed)
        assert store.load(cid).turns == shorter.turns
        assert len(store.search()) == 1


def test_search_finds_prompts_answers_and_models_and_takes_wildcards_literally(
    tmp_path: Path,
) -> None:
    with ConversationStore(tmp_path / "c.sqlite") as store:
        a = store.save(conversation("tell me about rust"))
        b = store.save(conversation("50% off", model="qwen"))
        c = store.save(conversation("plain"))
        assert [s.id for s in store.search()] == [c, b, a]  # newest first
        assert [s.id for s in store.search("RUST")] == [a]
        assert [s.id for s in store.search("answer to plain")] == [c]
        assert [s.id for s in store.search("qwen")] == [b]
        assert [s.id for s in store.search("%")] == [b]
        assert store.search("_x_") == []
        summary = store.search("rust")[0]
        assert (summary.title, summary.turns, summary.model) == ("tell me about rust", 1, "m")


def test_the_number_of_conversations_and_text_lengths_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cs, "MAX_CONVERSATIONS", 3)
    monkeypatch.setattr(cs, "MAX_TEXT_CHARS", 10)
    monkeypatch.setattr(cs, "MAX_TURNS", 2)
    with ConversationStore(tmp_path / "c.sqlite") as store:
        ids = [store.save(conversation(f"p{i}", "x")) for i in range(5)]
        assert [s.id for s in store.search()] == ids[:1:-1]  # the 3 newest kept
        with pytest.raises(ConversationStoreError, match="no saved conversation"):
            store.load(ids[0])
        long = store.save(conversation("z" * 50))
        loaded = store.load(long)
        assert len(loaded.turns) == 1
        assert loaded.turns[0].prompt.startswith("z" * 10)
        assert "cut" in loaded.turns[0].prompt and "z" * 11 not in loaded.turns[0].prompt
        assert len(store.load(ids[-1]).turns) == 2  # MAX_TURNS (a third: the next test)


def test_a_conversation_past_its_turns_or_characters_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store cut a conversation to its first MAX_TURNS turns without a word (the newest
    answers were lost) and took any size; now a save past either cap is refused with one line
    and writes nothing (the saver shows it; the chat goes on)."""
    monkeypatch.setattr(cs, "MAX_TURNS", 2)
    monkeypatch.setattr(cs, "MAX_CONVERSATION_CHARS", 40)
    with ConversationStore(tmp_path / "c.sqlite") as store:
        cid = store.save(conversation("p1", "p2"))
        kept = store.load(cid)
        with pytest.raises(ConversationFullError, match="would hold 3 turns") as err:
            store.save(replace(kept, turns=(*kept.turns, SavedTurn("p3", "a"))))
        assert "\n" not in str(err.value) and f"conversation {cid}" in str(err.value)
        big = replace(kept, turns=(SavedTurn("p1", "a" * 30), SavedTurn("p2", "b" * 30)))
        with pytest.raises(ConversationFullError, match=r"more than the 0\.0 MB"):
            store.save(big)
        assert store.load(cid) == kept  # nothing written


def test_the_last_turns_of_a_long_conversation_load_alone_and_save_in_place(
    tmp_path: Path,
) -> None:
    """`--resume` reads a long conversation's last turns only (at most so many, holding at
    most so many characters, always the last one); saving that part writes after the turns it
    did not load and leaves them, and the title, as they were."""
    path = tmp_path / "c.sqlite"
    with ConversationStore(path) as store:
        whole = conversation(*(f"p{i}" for i in range(6)))
        cid = store.save(whole)
        size = sum(len(t.prompt) + len(t.answer) for t in whole.turns)  # 6 x 14 characters
        part = store.load(cid, last_turns=4, last_chars=30)
        assert [t.prompt for t in part.turns] == ["p4", "p5"]  # 2 x 14 <= 30 < 3 x 14
        assert (part.first_turn, part.stored_chars) == (4, size)
        assert [t.prompt for t in store.load(cid, last_turns=3).turns] == ["p3", "p4", "p5"]
        assert len(store.load(cid, last_chars=1).turns) == 1  # always the last turn
        assert store.load(cid, last_turns=10).first_turn == 0
        longer = replace(part, turns=(*part.turns, SavedTurn("p6", "a6")))
        store.save(longer, previous=part)
        store.save(replace(part, turns=part.turns[:1]), previous=longer)  # edit-last: p5 taken
        again = store.load(cid)
        assert [t.prompt for t in again.turns] == ["p0", "p1", "p2", "p3", "p4"]
        assert again.title == "p0" and again.first_turn == 0


def test_a_missing_file_reads_as_empty_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "none" / "chats.sqlite"
    with ConversationStore(path, create=False) as store:
        assert store.search() == []
        with pytest.raises(ConversationStoreError, match="no saved conversation 4"):
            store.load(4)
    assert not path.parent.exists()


# ------------------------------------------------------------------ broken files


def test_a_corrupt_file_is_one_line_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    junk = b"this is not a database\n" * 100
    path.write_bytes(junk)
    with pytest.raises(ConversationStoreError) as err:
        ConversationStore(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert "not a database" in str(err.value)
    assert path.read_bytes() == junk


def test_a_directory_in_its_place_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    path.mkdir()
    for create in (True, False):
        with pytest.raises(ConversationStoreError, match="is a directory") as err:
            ConversationStore(path, create=create)
        assert "\n" not in str(err.value)


def test_another_programs_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE notes (x)").connection.commit()
    with pytest.raises(ConversationStoreError, match="not specmon's"):
        ConversationStore(path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("notes",)]


def test_a_file_from_a_newer_specmon_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    with ConversationStore(path) as store:
        store.save(conversation("x"))
    sqlite3.connect(path).execute(f"PRAGMA user_version = {cs.SCHEMA_VERSION + 1}")
    with pytest.raises(ConversationStoreError, match="newer specmon"):
        ConversationStore(path)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """The file made unwritable: chmod for a user, `chattr +i` for root (who ignores modes)."""
    if os.geteuid() != 0:
        path.chmod(0o400)
        path.parent.chmod(0o500)
        try:
            yield
        finally:
            path.parent.chmod(0o700)
            path.chmod(0o600)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("running as root without chattr: cannot make a file read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_read_only_file_lists_but_a_save_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    with ConversationStore(path) as store:
        cid = store.save(conversation("kept"))
    sqlite3.connect(path).execute("PRAGMA journal_mode = DELETE")  # no -wal/-shm left over
    before = path.read_bytes()
    with read_only(path):
        with ConversationStore(path, create=False) as store:
            assert [s.id for s in store.search()] == [cid]
        with (
            pytest.raises(ConversationStoreError, match="readonly") as err,
            ConversationStore(path) as store,
        ):
            store.save(conversation("new"))
        assert "\n" not in str(err.value)
    assert path.read_bytes() == before


def test_a_database_locked_by_another_program_is_one_line_within_the_busy_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.sqlite"
    ConversationStore(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with (
            pytest.raises(ConversationStoreError, match="locked"),
            ConversationStore(path) as store,
        ):
            store.save(conversation("x"))
    finally:
        other.execute("ROLLBACK")


# ------------------------------------------------------------------ the saver


def test_the_saver_writes_the_newest_snapshot_and_updates_one_conversation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.sqlite"
    saver = ChatSaver(lambda: ConversationStore(path))
    saver.save(conversation("one"))
    assert saver.flush()
    saver.save(conversation("one", "two"))
    saver.close()
    assert saver.problem is None
    with ConversationStore(path, create=False) as store:
        (summary,) = store.search()
        assert summary.id == saver.conversation_id
        assert [t.prompt for t in store.load(summary.id).turns] == ["one", "two"]


def test_a_resumed_conversation_is_saved_under_its_own_id(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    with ConversationStore(path) as store:
        cid = store.save(conversation("old"))
        resumed = store.load(cid)
    saver = ChatSaver(lambda: ConversationStore(path), resumed=resumed)
    saver.save(SavedConversation((*resumed.turns, SavedTurn("new", "n")), resumed.server))
    saver.close()
    with ConversationStore(path, create=False) as store:
        assert [s.id for s in store.search()] == [cid]
        assert [t.prompt for t in store.load(cid).turns] == ["old", "new"]


def test_the_saver_stops_at_the_first_failure_and_says_so_once(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    path.write_bytes(b"garbage" * 200)
    saver = ChatSaver(lambda: ConversationStore(path))
    saver.save(conversation("x"))
    assert saver.flush()
    line = saver.take_problem()
    assert line is not None and str(path) in line and "\n" not in line
    assert saver.take_problem() is None  # shown once
    saver.save(conversation("y"))  # ignored, no second thread, no exception
    saver.close()
    assert path.read_bytes() == b"garbage" * 200


def test_no_api_key_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    key = "sk-live-7f3a9c1e5b2d4a68"
    leaky = SavedConversation(
        turns=(SavedTurn(f"my key is {key}", f"you said {key}", error=f"HTTP 401 {key}"),),
        server=SavedServer(f"http://user:{key}@127.0.0.1:8000/v1?api_key={key}#{key}", "m"),
        settings=SavedSettings(f"system {key}"),
    )
    saver = ChatSaver(lambda: ConversationStore(path), secrets=[key])
    saver.save(leaky)
    saver.close()
    assert saver.problem is None
    files = [p for p in tmp_path.iterdir() if p.name.startswith("chats.sqlite")]
    assert files
    for p in files:
        assert key.encode() not in p.read_bytes(), p.name
    with ConversationStore(path, create=False) as store:
        loaded = store.load(store.search()[0].id)
    assert loaded.server.url == "http://127.0.0.1:8000/v1"
    assert loaded.turns[0].prompt.startswith("my key is ")


def test_two_stores_opening_a_new_file_at_once_both_work(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "chats.sqlite"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_and_save(i: int) -> None:
        start.wait()
        try:
            with ConversationStore(path) as store:
                store.save(conversation(f"p{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_save, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with ConversationStore(path, create=False) as store:
        assert len(store.search()) == 4


def test_a_failed_write_leaves_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    with ConversationStore(path) as store:
        cid = store.save(conversation("one"))
        bad = SavedConversation(
            (SavedTurn("x", "y"), SavedTurn("z", object())),  # type: ignore[arg-type]
            id=cid,
        )
        with pytest.raises(Exception):  # noqa: B017 - any error: the point is the rollback
            store.save(bad)
        assert [t.prompt for t in store.load(cid).turns] == ["one"]


def test_each_turns_system_prompt_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    turns = (
        SavedTurn("one", "a", system=""),
        SavedTurn("two", "b", system="be terse"),
        SavedTurn("three", "c", system=None),
    )
    with ConversationStore(path) as store:
        cid = store.save(SavedConversation(turns, settings=SavedSettings("be terse")))
    with ConversationStore(path, create=False) as store:
        assert [t.system for t in store.load(cid).turns] == ["", "be terse", None]


def _version_1_file(path: Path) -> None:
    """A chat file as specmon wrote it before turns kept their system prompt (schema 1)."""
    schema = cs._SCHEMA.replace("    system TEXT,\n    PRIMARY KEY", "    PRIMARY KEY")
    assert schema != cs._SCHEMA
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at, system) VALUES "
        "(1, 'old', '2026-11-01T00:00:00+00:00', '2026-11-01T00:00:00+00:00', 'old rule')"
    )
    db.execute(
        "INSERT INTO turns (conversation_id, idx, prompt, answer, status) VALUES "
        "(1, 0, 'hi', 'hello', 'ok')"
    )
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()


def test_a_version_1_file_reads_and_is_upgraded_when_written(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite"
    _version_1_file(path)
    with ConversationStore(path, create=False) as store:  # read only: left at version 1
        old = store.load(1)
    assert [(t.prompt, t.system) for t in old.turns] == [("hi", None)]
    assert old.settings.system == "old rule"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    with ConversationStore(path) as store:
        turns = (*old.turns, SavedTurn("more", "sure", system="new rule"))
        store.save(SavedConversation(turns, settings=SavedSettings("new rule"), id=1))
        assert [t.system for t in store.load(1).turns] == [None, "new rule"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_version_1_file_reads_in_part_and_read_only_without_the_new_column(
    tmp_path: Path,
) -> None:
    """A partial load (`--resume`) measures the turns; on a version 1 file, opened read-only
    and so not upgraded, there is no `system` column to measure."""
    path = tmp_path / "chats.sqlite"
    _version_1_file(path)
    with ConversationStore(path, create=False) as store:
        part = store.load(1, last_turns=1, last_chars=100)
    assert [(t.prompt, t.system) for t in part.turns] == [("hi", None)]
    assert (part.first_turn, part.stored_chars) == (0, 0)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_a_version_1_file_locked_when_opened_is_upgraded_by_a_later_save(
    tmp_path: Path,
) -> None:
    """Opened for writing while another program held the lock, the file stays version 1; the
    save then says the file is busy (the saver tries again) instead of failing on a missing
    column, and once the lock is let go it upgrades the file and writes the turn."""
    path = tmp_path / "chats.sqlite"
    _version_1_file(path)
    with write_lock_held(path) as release:
        store = ConversationStore(path, busy_timeout_s=0.05)
        old = store.load(1)
        more = replace(old, turns=(*old.turns, SavedTurn("more", "sure", system="rule")))
        with pytest.raises(cs.ConversationStoreBusy):
            store.save(more)
        release.set()
    with store:
        store.save(more)
        assert [t.system for t in store.load(1).turns] == [None, "rule"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


def test_the_turns_system_prompts_count_toward_the_conversation_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each turn stores the system prompt it was sent with, so the cap counts it."""
    monkeypatch.setattr(cs, "MAX_CONVERSATION_CHARS", 40)
    turns = (SavedTurn("p1", "a", system="s" * 30), SavedTurn("p2", "b", system="s" * 30))
    with ConversationStore(tmp_path / "c.sqlite") as store:
        with pytest.raises(ConversationFullError):
            store.save(SavedConversation(turns))
        cid = store.save(SavedConversation(tuple(replace(t, system=None) for t in turns)))
        whole = store.load(cid)
        store.save(replace(whole, turns=(*whole.turns[:1], turns[1])))  # 2 + 1 + 2 + 1 + 30
        part = store.load(cid, last_turns=1)
    assert (part.first_turn, part.stored_chars) == (1, 36)


# ------------------------------------------------------------------ another program's lock


def _until(predicate: Callable[[], object], limit_s: float = 30.0) -> None:
    """Wait for a condition the saver's thread brings about (checked every 10 ms)."""
    pause = threading.Event()
    for _ in range(int(limit_s / 0.01)):
        if predicate():
            return
        pause.wait(0.01)
    raise AssertionError("condition not reached")


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[threading.Event]:
    """Another connection holds the file's write lock (BEGIN IMMEDIATE, in its own thread) until
    the yielded event is set (or the block ends)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait()
        other.execute("COMMIT")
        other.close()

    thread = threading.Thread(target=hold, name="other-program")
    thread.start()
    taken.wait()
    try:
        yield release
    finally:
        release.set()
        thread.join()


def notices(saver: ChatSaver) -> list[tuple[str, bool]]:
    out = []
    while (notice := saver.take_notice()) is not None:
        out.append(notice)
    return out


def test_a_lock_held_by_another_program_delays_the_save_and_the_answer_is_saved(
    tmp_path: Path,
) -> None:
    """One lock held longer than the busy timeout (0.5 s) turned saving off for the rest of
    the session (6 chats saving 1 MB answers at once: 2-3 stopped saving). Now the save waits
    and tries again with growing pauses, says once that it is delayed, and writes the answer
    when the lock is let go (here after the saver has found it held)."""
    path = tmp_path / "chats.sqlite"
    ConversationStore(path).close()
    said: list[tuple[str, bool]] = []
    with write_lock_held(path) as release:
        saver = ChatSaver(
            lambda: ConversationStore(path, busy_timeout_s=0.05), retry_delays=(0.05,) * 1000
        )
        saver.save(conversation("one"))
        _until(lambda: said.extend(notices(saver)) or said)
        (line, failed), *_ = said
        assert line.startswith("chat save delayed: ") and "locked" in line and not failed
        assert saver.unsaved and saver.problem is None
        release.set()
    assert saver.flush(timeout=30.0)
    assert not saver.unsaved and saver.problem is None
    said.extend(notices(saver))
    assert said[-1] == ("chat saved (it had waited for another program's lock)", False)
    assert sum(line.startswith("chat save delayed") for line, _ in said) == 1  # said once
    saver.close()
    with ConversationStore(path, create=False) as store:
        assert [t.prompt for t in store.load(saver.conversation_id or 0).turns] == ["one"]


def test_an_answer_the_retries_could_not_save_is_kept_and_saved_with_the_next(
    tmp_path: Path,
) -> None:
    """When every attempt found the file locked, the conversation is kept in memory (the user
    is told in one line) and written with the next answer; never dropped without a word."""
    path = tmp_path / "chats.sqlite"
    ConversationStore(path).close()
    with write_lock_held(path):
        saver = ChatSaver(
            lambda: ConversationStore(path, busy_timeout_s=0.05), retry_delays=(0.01, 0.01)
        )
        saver.save(conversation("one"))
        assert saver.flush(timeout=30.0)
        said = notices(saver)
        line, failed = said[-1]
        assert failed and line.startswith("chat not saved yet: ") and "\n" not in line
        assert "kept and saved with the next answer" in line
        assert saver.unsaved and saver.problem is None  # saving goes on
    saver.save(conversation("one", "two"))  # the next answer, the lock let go
    assert saver.flush(timeout=30.0) and not saver.unsaved
    assert notices(saver)[-1][0].startswith("chat saved")
    saver.close()
    with ConversationStore(path, create=False) as store:
        assert [t.prompt for t in store.load(saver.conversation_id or 0).turns] == ["one", "two"]


def test_a_kept_answer_is_written_at_quit_or_named_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chats.sqlite"
    ConversationStore(path).close()

    def saver() -> ChatSaver:
        return ChatSaver(lambda: ConversationStore(path, busy_timeout_s=0.05), retry_delays=(0.01,))

    with write_lock_held(path):
        released_later, still_locked = saver(), saver()
        for s in (released_later, still_locked):
            s.save(conversation("kept"))
            assert s.flush(timeout=30.0) and s.unsaved
        close_history(ChatHistory(still_locked))  # quit while the lock is still held
        assert still_locked.unsaved
    err = capsys.readouterr().err
    assert err.startswith("specmon chat: the last answers of the chat were not saved: ")
    assert err.count("\n") == 1
    close_history(ChatHistory(released_later))  # quit after the lock was let go: written
    assert not released_later.unsaved and capsys.readouterr().err == ""
    with ConversationStore(path, create=False) as store:
        assert [s.turns for s in store.search()] == [1]
