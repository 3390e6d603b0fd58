"""Saved conversations in the chat screen (fake port, real store in a temporary XDG data dir):
answers saved with their numbers and settings, a resumed conversation shown and continued, the
ctrl+s Markdown export, no API key in the file, and every kind of broken database gives one line
while the chat goes on."""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.ui_fakes import SIM_SERVER, FakePort, screen_text
from tests.support.waiting import wait_for_app
from tests.ui.chat_pilot import SIZE, ask_pasted, paste
from tests.ui.chat_pilot import answers as _answers
from tests.ui.chat_pilot import ask as _ask
from tests.ui.chat_pilot import connected as _connected

from specmon.core.chat_record import SavedConversation, SavedServer, SavedTurn
from specmon.sources import conversation_store
from specmon.sources.conversation_store import ConversationStore, default_path
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.port import Connection
from specmon.ui.saved_chats import (
    chat_history_for,
    chat_scrubber,
    close_history,
    pick_resumed,
)

KEY = "sk-test-4c1d8e9f0a2b7731"


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data" / "specmon" / "chats.sqlite"


def install_history(app: SpecmonApp, args: argparse.Namespace):
    """What `specmon chat` gives the app (`chat_history=`), set on an app built by the test."""
    scrubber = chat_scrubber(
        args.api_key, (getattr(args, "attach", None),), getattr(args, "redact", ())
    )
    history = chat_history_for(args.no_save, args.resumed, scrubber)
    app.chat_history = history
    return history


def cli_args(**given: object) -> argparse.Namespace:
    values: dict[str, object] = {"api_key": None, "no_save": False, "resumed": None}
    values.update(given)
    return argparse.Namespace(**values)


def saved(path: Path):
    with ConversationStore(path, create=False) as store:
        return [store.load(s.id) for s in store.search()]


def finished(app, n: int) -> bool:
    found = _answers(app)
    return len(found) == n and found[-1].finished


async def test_answers_are_saved_with_numbers_server_and_settings(data_home: Path) -> None:
    assert default_path() == data_home
    port = FakePort(answers=[["Hello", " there."], ["Second."]])
    app = SpecmonApp(port, settings=ChatSettings(0.3, 0.8, 64), system="be brief")
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await _ask(pilot, "again")
        await wait_for_app(pilot, lambda: finished(app, 2))
    close_history(history)
    (conv,) = saved(data_home)
    assert [(t.prompt, t.answer, t.status) for t in conv.turns] == [
        ("hi", "Hello there.", "ok"),
        ("again", "Second.", "ok"),
    ]
    n = conv.turns[0].numbers
    assert n is not None
    assert (n.tokens, n.ttft_s, n.acceptance_length, n.al_source) == (5, 0.1, 4.0, "chunks")
    assert conv.server.url == SIM_SERVER.url and conv.server.model == SIM_SERVER.model
    assert conv.server.simulated and conv.server.n_spec == 8
    assert (conv.settings.system, conv.settings.temperature, conv.settings.max_tokens) == (
        "be brief",
        0.3,
        64,
    )
    assert conv.title == "hi"


async def test_no_save_writes_nothing(data_home: Path) -> None:
    app = SpecmonApp(FakePort(answers=[["x"]]))
    history = install_history(app, cli_args(no_save=True))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
    close_history(history)
    assert not data_home.parent.exists()


async def test_a_resumed_conversation_is_shown_sent_as_context_and_saved_in_place(
    data_home: Path,
) -> None:
    first = SpecmonApp(FakePort(answers=[["first", " answer"]]))
    history = install_history(first, cli_args())
    async with first.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: finished(first, 1))
    close_history(history)
    (conv,) = saved(data_home)

    port = FakePort(answers=[["second answer"]])
    app = SpecmonApp(port)
    history = install_history(app, cli_args(resumed=conv))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await wait_for_app(
            pilot, lambda: f"resumed conversation {conv.id}: 1 turn" in screen_text(app)
        )
        text = screen_text(app)
        assert "first answer" in text
        assert "AL 4.00 (chunks)" in text  # the saved numbers under the saved answer
        await _ask(pilot, "two")
        await wait_for_app(pilot, lambda: finished(app, 2))
        assert port.requests[0].messages == (("user", "one"), ("assistant", "first answer"))
    close_history(history)
    (again,) = saved(data_home)
    assert again.id == conv.id
    assert [t.prompt for t in again.turns] == ["one", "two"]


async def test_changed_settings_are_saved_with_the_conversation(data_home: Path) -> None:
    app = SpecmonApp(FakePort(answers=[["a"]]))
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await pilot.press("f2")
        await pilot.click("#temperature")
        await pilot.press("1", "enter")
        await pilot.pause()
    close_history(history)
    (conv,) = saved(data_home)
    assert conv.settings.temperature == 1.0


async def test_ctrl_s_exports_the_conversation_as_markdown(data_home: Path, tmp_path: Path) -> None:
    app = SpecmonApp(FakePort(answers=[["**bold**", " answer"]]))
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "nothing to export yet" in screen_text(app)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await pilot.press("ctrl+s")
        await wait_for_app(pilot, lambda: "exported to" in screen_text(app))
    close_history(history)
    (exported,) = tmp_path.glob("specmon-chat-*.md")
    md = exported.read_text()
    assert "> hi" in md and "**bold** answer" in md
    assert "5 tokens" in md and "AL 4.00 (chunks)" in md


@pytest.mark.slow
async def test_no_api_key_from_the_flag_or_the_environment_reaches_the_database(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_key = "sk-env-99aa88bb77cc66dd"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    server = replace(SIM_SERVER, url=f"http://user:{KEY}@127.0.0.1:8000/?api_key={env_key}")
    port = FakePort(Connection(server), answers=[[f"echo {KEY} and {env_key}"]])
    app = SpecmonApp(port, system=f"sys {KEY}")
    history = install_history(app, cli_args(api_key=KEY))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, f"my key {KEY}")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await pilot.press("ctrl+s")
        await wait_for_app(pilot, lambda: "exported to" in screen_text(app))
    close_history(history)
    files = list(data_home.parent.iterdir()) + list(Path.cwd().glob("specmon-chat-*.md"))
    assert any(p.suffix == ".md" for p in files) and data_home in files
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data and env_key.encode() not in data, path.name
    (conv,) = saved(data_home)
    assert conv.server.url == "http://127.0.0.1:8000/"
    assert conv.turns[0].prompt.startswith("my key ")


PASSWORD = "s3cret-pw"
HF_TOKEN = "hf_abcDEF0123456789ghiJKL"


def no_secret_in(files: list[Path], *secrets: str) -> None:
    for path in files:
        data = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, (path.name, secret)


@pytest.mark.slow
async def test_no_url_password_env_token_or_redacted_text_reaches_the_files(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server URL's password and $HF_TOKEN are kept out of every column, and `--redact`
    patterns apply to saved chats: the database, its WAL and shared-memory files while the chat
    runs, and the Markdown export, hold none of them."""
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    url = f"http://alice:{PASSWORD}@127.0.0.1:8000"
    ticket = "TICKET-4242-XYZ"
    server = replace(SIM_SERVER, url=url, model=f"m-{HF_TOKEN}")
    said = f"the password is {PASSWORD}, the token {HF_TOKEN}, ticket {ticket}"
    port = FakePort(Connection(server), answers=[[said]])
    app = SpecmonApp(port, system=f"use {url}")
    args = cli_args(attach=url, redact=[r"TICKET-\d+-[A-Z]+"])
    history = install_history(app, args)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await ask_pasted(pilot, f"log in as {PASSWORD} with {HF_TOKEN} for {ticket}")
        await wait_for_app(pilot, lambda: finished(app, 1))
        assert history.saver is not None and history.saver.flush()
        live = sorted(data_home.parent.iterdir())
        assert {p.name for p in live} >= {"chats.sqlite", "chats.sqlite-wal"}
        no_secret_in(live, PASSWORD, HF_TOKEN, ticket)
        await pilot.press("ctrl+s")
        await wait_for_app(pilot, lambda: "exported to" in screen_text(app))
    close_history(history)
    files = list(data_home.parent.iterdir()) + list(Path.cwd().glob("specmon-chat-*.md"))
    assert any(p.suffix == ".md" for p in files)
    no_secret_in(files, PASSWORD, HF_TOKEN, ticket)
    (conv,) = saved(data_home)
    assert conv.server.url == "http://127.0.0.1:8000"
    assert (
        conv.turns[0].answer
        == "the password is [REDACTED], the token [REDACTED], ticket [REDACTED]"
    )


# ------------------------------------------------------------------ broken databases


def corrupt(path: Path) -> contextlib.AbstractContextManager[None]:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"definitely not sqlite\n" * 50)
    return contextlib.nullcontext()


def directory(path: Path) -> contextlib.AbstractContextManager[None]:
    path.mkdir(parents=True)
    return contextlib.nullcontext()


@contextlib.contextmanager
def read_only(path: Path):
    ConversationStore(path).close()
    sqlite3.connect(path).execute("PRAGMA journal_mode = DELETE")
    if os.geteuid() != 0:
        path.chmod(0o400)
        path.parent.chmod(0o500)
        try:
            yield
        finally:
            path.parent.chmod(0o700)
        return
    if subprocess.run(["chattr", "+i", str(path)], check=False).returncode != 0:
        pytest.skip("running as root without chattr: cannot make a file read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def problem_notices(app) -> list[str]:
    """The text of the conversation's notices that say saving failed."""
    notes = [str(n.render()) for n in app.screen.query(".notice")]
    return [n for n in notes if n.startswith("chat not saved:")]


@pytest.mark.parametrize(
    ("breakage", "words"),
    [
        (corrupt, "not a database"),
        (directory, "is a directory"),
        (read_only, "readonly"),
    ],
)
@pytest.mark.slow
async def test_a_broken_database_is_one_line_and_the_chat_goes_on(
    data_home: Path, breakage, words: str
) -> None:
    with breakage(data_home):
        port = FakePort(answers=[["first"], ["second"]])
        app = SpecmonApp(port)
        history = install_history(app, cli_args())
        async with app.run_test(size=SIZE) as pilot:
            await _connected(pilot)
            await _ask(pilot, "one")
            await wait_for_app(pilot, lambda: finished(app, 1))
            assert history.saver is not None
            history.saver.flush()
            await wait_for_app(pilot, lambda: bool(problem_notices(app)))
            (line,) = problem_notices(app)
            assert "\n" not in line and words in line and str(data_home) in line
            await _ask(pilot, "two")
            await wait_for_app(pilot, lambda: finished(app, 2))
            await wait_for_app(pilot, lambda: "second" in screen_text(app))
            assert len(problem_notices(app)) == 1
        close_history(history)
        assert len(port.requests) == 2


def notice_lines(app) -> list[str]:
    return [str(n.render()) for n in app.screen.query(".notice")]


@pytest.mark.slow
async def test_a_lock_held_by_another_program_delays_the_save_and_the_chat_goes_on(
    data_home: Path,
) -> None:
    """A lock held longer than the busy timeout stopped saving for the session ("chat not
    saved: … database is locked"); now the screen says the save is delayed, and once the lock
    is let go the answer is saved and the screen says so."""
    ConversationStore(data_home).close()
    other = sqlite3.connect(data_home, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        port = FakePort(answers=[["first"], ["second"]])
        app = SpecmonApp(port)
        history = install_history(app, cli_args())
        async with app.run_test(size=SIZE) as pilot:
            await _connected(pilot)
            await _ask(pilot, "one")
            await wait_for_app(pilot, lambda: finished(app, 1))
            delayed = lambda: [n for n in notice_lines(app) if n.startswith("chat save delayed")]  # noqa: E731
            await wait_for_app(pilot, lambda: bool(delayed()))
            (line,) = delayed()
            assert "database is locked" in line and str(data_home) in line and "\n" not in line
            other.execute("COMMIT")  # the other program lets go
            await wait_for_app(
                pilot, lambda: any(n.startswith("chat saved") for n in notice_lines(app))
            )
            assert not problem_notices(app)
            await _ask(pilot, "two")
            await wait_for_app(pilot, lambda: finished(app, 2))
        close_history(history)
    finally:
        other.close()
    (conv,) = saved(data_home)
    assert [t.prompt for t in conv.turns] == ["one", "two"]


@pytest.mark.slow
async def test_a_long_conversation_resumes_with_its_last_turns_and_says_how_much_it_holds(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a 100 MB conversation put every turn on screen (70 s, 1.9 GB). `--resume` loads
    its last turns only (RESUME_TURNS, RESUME_CHARS; 3 here) with one line saying so; the next
    answer is saved after them, the earlier turns and the title kept."""
    monkeypatch.setattr(conversation_store, "RESUME_TURNS", 3)
    with ConversationStore(data_home) as store:
        cid = store.save(
            SavedConversation(
                tuple(SavedTurn(f"question {i}", f"answer {i} " + "x" * 1000) for i in range(8)),
                SavedServer("http://127.0.0.1:9000", "m"),
            )
        )
    resumed = pick_resumed(str(cid))
    assert isinstance(resumed, SavedConversation)
    assert [t.prompt for t in resumed.turns] == ["question 5", "question 6", "question 7"]
    port = FakePort(answers=[["ninth answer"]])
    app = SpecmonApp(port)
    history = install_history(app, cli_args(resumed=resumed))
    line = f"conversation {cid} holds 0.0 MB in 8 turns; loaded the last 3 turns"
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await wait_for_app(pilot, lambda: line in screen_text(app))
        assert "answer 7" in screen_text(app) and "question 4" not in screen_text(app)
        assert len(_answers(app)) == 3
        await _ask(pilot, "question 8")
        await wait_for_app(pilot, lambda: finished(app, 4))
    close_history(history)
    (conv,) = saved(data_home)
    assert conv.id == cid and conv.title == "question 0"
    assert [t.prompt for t in conv.turns] == [f"question {i}" for i in range(9)]
    assert conv.turns[8].answer == "ninth answer"


# ------------------------------------------------------------------ copy and edit


def _last_notice(app) -> str:
    return str(app.screen.query(".notice").last().content)


async def test_copy_the_last_answer_and_its_last_code_block(
    data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    kept = state / "specmon" / "clipboard.txt"
    answer = ["Run", " this:\n\n```sh\nls -l\n```\n\nthen\n\n```py\nprint(1)\nprint(2)\n```\n"]
    app = SpecmonApp(FakePort(answers=[answer]))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert "nothing to copy yet" in screen_text(app)
        assert not kept.exists()
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await pilot.press("ctrl+b")
        await wait_for_app(pilot, lambda: "code block" in _last_notice(app))
        # whether the terminal took the OSC 52 write cannot be known: the line says it was
        # sent, and names the file that holds the text as well
        assert _last_notice(app) == (
            "the last code block (2 lines) sent to the terminal's clipboard (OSC 52) — "
            f"if nothing was copied, the text is also in {kept}"
        )
        assert app.clipboard == "print(1)\nprint(2)"
        assert kept.read_text(encoding="utf-8") == "print(1)\nprint(2)"
        assert kept.stat().st_mode & 0o077 == 0
        await pilot.press("ctrl+y")
        await wait_for_app(pilot, lambda: "the last answer" in _last_notice(app))
        assert f"(OSC 52) — if nothing was copied, the text is also in {kept}" in _last_notice(app)
        assert app.clipboard == "".join(answer)
        assert kept.read_text(encoding="utf-8") == "".join(answer)


async def test_a_copy_file_that_cannot_be_written_is_said_and_the_copy_still_sent(
    data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    (state / "specmon").mkdir(parents=True)
    (state / "specmon" / "clipboard.txt").mkdir()  # a directory where the file goes
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    app = SpecmonApp(FakePort(answers=[["plain answer"]]))
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await pilot.press("ctrl+y")
        await wait_for_app(pilot, lambda: "the last answer" in _last_notice(app))
        line = _last_notice(app)
        assert "sent to the terminal's clipboard (OSC 52); it could not also be written" in line
        assert "\n" not in line
        assert app.clipboard == "plain answer"


@pytest.mark.slow
async def test_edit_last_takes_the_turn_back_and_enter_resends_it(data_home: Path) -> None:
    port = FakePort(answers=[["first", " answer"], ["bad", " answer"], ["good", " answer"]])
    app = SpecmonApp(port)
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "one")
        await wait_for_app(pilot, lambda: finished(app, 1))
        await _ask(pilot, "twoo")
        await wait_for_app(pilot, lambda: finished(app, 2))
        await pilot.press("ctrl+up")
        await wait_for_app(pilot, lambda: len(_answers(app)) == 1)
        prompt = app.screen.query_one("#prompt")
        assert prompt.value == "twoo"
        assert "bad answer" not in screen_text(app)
        await pilot.press("backspace", "enter")
        await wait_for_app(pilot, lambda: finished(app, 2))
        assert port.requests[-1].prompt == "two"
        assert port.requests[-1].messages == (("user", "one"), ("assistant", "first answer"))
        await wait_for_app(pilot, lambda: "good answer" in screen_text(app))
    close_history(history)
    (conv,) = saved(data_home)
    assert [(t.prompt, t.answer) for t in conv.turns] == [
        ("one", "first answer"),
        ("two", "good answer"),
    ]


async def test_edit_last_while_streaming_or_with_nothing_sent_only_says_why(
    data_home: Path,
) -> None:
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+up")
        await pilot.pause()
        assert "no prompt to edit yet" in screen_text(app)
        await _ask(pilot, "hi")
        await wait_for_app(pilot, lambda: len(port.feeds) == 1)
        await pilot.press("ctrl+up")
        await pilot.pause()
        assert "still streaming" in screen_text(app)
        assert len(_answers(app)) == 1


@pytest.mark.slow
async def test_the_system_prompt_is_edited_per_conversation_sent_and_saved(
    data_home: Path,
) -> None:
    port = FakePort(answers=[["a", "b"], ["c", "d"], ["e", "f"]])
    app = SpecmonApp(port, system="old system")
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("escape")  # cancel: unchanged
        await pilot.pause()
        await ask_pasted(pilot, "one")
        await wait_for_app(pilot, lambda: finished(app, 1))
        assert port.requests[0].system == "old system"
        await pilot.press("ctrl+o")
        await pilot.pause()
        app.screen.query_one("#system-text").text = ""
        await paste(pilot, "be terse")
        await pilot.press("enter")  # a new line in the system prompt: it is not sent yet
        await paste(pilot, "always")
        await pilot.press("ctrl+s")
        await wait_for_app(pilot, lambda: "system prompt set: be terse" in screen_text(app))
        await ask_pasted(pilot, "two")
        await wait_for_app(pilot, lambda: finished(app, 2))
        assert port.requests[1].system == "be terse\nalways"
        assert history.saver is not None and history.saver.flush()
        assert saved(data_home)[0].settings.system == "be terse\nalways"
        await pilot.press("ctrl+o")
        await pilot.pause()
        app.screen.query_one("#system-text").text = "   "
        await pilot.click("#system-save")
        await wait_for_app(pilot, lambda: "no system prompt" in screen_text(app))
        await ask_pasted(pilot, "three")
        await wait_for_app(pilot, lambda: finished(app, 3))
        assert port.requests[2].system is None
    close_history(history)
    (conv,) = saved(data_home)
    assert conv.settings.system is None


@pytest.mark.parametrize("verdict", ["ok", "transition", "vanilla-speed", "failed", "unjudged"])
def test_a_saved_verdict_reads_back_as_itself(verdict: str) -> None:
    """A resumed answer keeps its badge: "vanilla-speed" was not among the names read back, so a
    flagged answer came back unjudged."""
    from specmon.core.chat_record import SavedNumbers
    from specmon.ui.answer_numbers import AnswerNumbers
    from specmon.ui.chat_history import answer_numbers, saved_numbers

    numbers = AnswerNumbers(3, 100.0, 0.1, 3.0, 0.3, "server", flag=verdict)  # type: ignore[arg-type]
    saved = saved_numbers(numbers)
    assert answer_numbers(saved).flag == verdict
    assert answer_numbers(SavedNumbers(verdict="no-such-verdict")).flag == "unjudged"


@pytest.mark.slow
async def test_a_system_prompt_set_after_turn_2_is_exported_where_it_took_effect(
    data_home: Path, tmp_path: Path
) -> None:
    port = FakePort(answers=[["a", "b"], ["c", "d"], ["e", "f"]])
    app = SpecmonApp(port)
    history = install_history(app, cli_args())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        for n, prompt in enumerate(("one", "two"), 1):
            await _ask(pilot, prompt)
            await wait_for_app(pilot, lambda n=n: finished(app, n))
        await pilot.press("ctrl+o")
        await pilot.pause()
        app.screen.query_one("#system-text").text = ""
        await pilot.press(*"be terse", "ctrl+s")
        await wait_for_app(pilot, lambda: "system prompt set: be terse" in screen_text(app))
        await _ask(pilot, "three")
        await wait_for_app(pilot, lambda: finished(app, 3))
        await pilot.press("ctrl+s")
        await wait_for_app(pilot, lambda: "exported to" in screen_text(app))
        assert history.saver is not None and history.saver.flush()
    close_history(history)
    (conv,) = saved(data_home)
    assert [t.system for t in conv.turns] == ["", "", "be terse"]  # each turn's, as sent
    (exported,) = tmp_path.glob("specmon-chat-*.md")
    md = exported.read_text()
    assert "System prompt:" not in md  # nothing applied to the whole conversation
    change = md.index("System prompt from here on:\n\n> be terse\n")
    assert md.index("## 2. Prompt") < change < md.index("## 3. Prompt")
