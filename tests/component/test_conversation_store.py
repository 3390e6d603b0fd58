"""The SQLite conversation store and the background saver: round trip, schema version, bounds,
search, and every way the file can be unusable (one-line error, file left as it was)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
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
from specmon.sources.conversation_store import ConversationStore, ConversationStoreError

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
        ids = [store.save(conversation(f"p{i}", "x", "y")) for i in range(5)]
        assert [s.id for s in store.search()] == ids[:1:-1]  # the 3 newest kept
        with pytest.raises(ConversationStoreError, match="no saved conversation"):
            store.load(ids[0])
        long = store.save(conversation("z" * 50))
        loaded = store.load(long)
        assert len(loaded.turns) == 1
        assert loaded.turns[0].prompt.startswith("z" * 10)
        assert "cut" in loaded.turns[0].prompt and "z" * 11 not in loaded.turns[0].prompt
        assert len(store.load(ids[-1]).turns) == 2  # MAX_TURNS


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
