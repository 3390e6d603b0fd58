"""`specmon chat --export-chat ID FILE`, `--resume [ID]` and `--no-save` on the command line:
outputs, exit codes and one-line errors (no server needed)."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import specmon
from specmon.cli.chat_cmd import ChatPlan, resumed_plan
from specmon.cli.chat_history_args import HistoryFlags
from specmon.cli.main import main
from specmon.core.chat_record import (
    SavedConversation,
    SavedNumbers,
    SavedServer,
    SavedSettings,
    SavedTurn,
)
from specmon.runtime.host_plan import HostFlags
from specmon.sources.conversation_store import ConversationStore


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    return tmp_path / "data" / "specmon" / "chats.sqlite"


def save_one(path: Path) -> int:
    with ConversationStore(path) as store:
        return store.save(
            SavedConversation(
                (SavedTurn("hello", "world", numbers=SavedNumbers(tokens=3, decode_tok_s=50.0)),),
                SavedServer("http://127.0.0.1:9000", "qwen"),
                SavedSettings("be brief", 0.2, None, 32),
            )
        )


def test_export_chat_writes_markdown_to_a_file_and_to_stdout(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cid = save_one(store_path)
    out = tmp_path / "chat.md"
    assert main(["chat", "--export-chat", str(cid), str(out)]) == 0
    md = out.read_text()
    assert md.startswith("# hello\n") and "> hello" in md and "world" in md
    assert "*3 tokens · 50.0 tok/s" in md
    assert f"conversation {cid} written to {out}" in capsys.readouterr().err
    assert main(["chat", "--export-chat", str(cid), "-"]) == 0
    assert capsys.readouterr().out == md


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["--export-chat", "x", "f.md"], 2, "--export-chat ID must be a conversation number"),
        (["--export-chat", "0", "f.md"], 2, "--export-chat ID must be a conversation number"),
        (["--export-chat", "7", "f.md"], 1, "no saved conversation 7"),
        (["--resume", "abc", "--attach", "http://h:1"], 2, "--resume ID must be"),
        (["--resume", "7", "--attach", "http://h:1"], 1, "no saved conversation 7"),
        (["--resume"], 2, "needs a terminal for the list"),
    ],
)
def test_bad_ids_and_missing_conversations_are_one_line(
    store_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    words: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    save_one(store_path)
    assert main(["chat", *argv]) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not (tmp_path / "f.md").exists()


def test_export_chat_from_a_broken_database_is_one_line_and_leaves_it(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_bytes(b"junk" * 300)
    assert main(["chat", "--export-chat", "1", "-"]) == 1
    err = capsys.readouterr().err
    assert "not a database" in err and err.count("\n") == 1
    assert store_path.read_bytes() == b"junk" * 300


def test_export_chat_to_an_unwritable_place_is_one_line(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cid = save_one(store_path)
    assert main(["chat", "--export-chat", str(cid), str(tmp_path / "no" / "dir" / "x.md")]) == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and err.count("\n") == 1


def test_export_chat_scrubs_the_environment_tokens_and_the_redact_patterns(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation written before its secrets were known (an older specmon) is exported
    without the environment's token values and without what --redact matches."""
    token = "hf_T0kenFromTheEnv1234"
    monkeypatch.setenv("HF_TOKEN", token)
    with ConversationStore(store_path) as store:
        cid = store.save(
            SavedConversation(
                (SavedTurn(f"use {token}", "order ORD-778899 shipped", error=f"401 {token}"),),
                SavedServer("http://127.0.0.1:9000", "qwen"),
            )
        )
    out = tmp_path / "chat.md"
    assert main(["chat", "--export-chat", str(cid), str(out), "--redact", r"ORD-\d+"]) == 0
    md = out.read_text()
    assert token not in md and "ORD-778899" not in md
    assert "order [REDACTED] shipped" in md


def args(*, resume: str, preset: str | None = None, **given: Any) -> ChatPlan:
    """A chat's plan with `--resume` (and `--preset`) and the other flags `given`."""
    return ChatPlan(host=HostFlags(preset=preset), history=HistoryFlags(resume=resume), **given)


def test_resume_id_reconnects_to_the_saved_server_with_its_settings(store_path: Path) -> None:
    cid = save_one(store_path)
    a = resumed_plan(args(resume=str(cid)))
    assert isinstance(a, ChatPlan)
    resumed = a.resumed
    assert isinstance(resumed, SavedConversation) and resumed.id == cid
    assert (a.attach, a.model) == ("http://127.0.0.1:9000", "qwen")
    assert (a.system, a.temperature, a.top_p, a.max_tokens) == ("be brief", 0.2, None, 32)


def test_flags_given_win_over_the_saved_conversation(store_path: Path) -> None:
    cid = save_one(store_path)
    a = resumed_plan(
        args(resume=str(cid), attach="http://other:1", system="new system", temperature=0.9)
    )
    assert isinstance(a, ChatPlan) and isinstance(a.resumed, SavedConversation)
    assert (a.attach, a.model, a.system, a.temperature) == (
        "http://other:1",
        None,
        "new system",
        0.9,
    )
    assert a.max_tokens == 32


class _Tty:
    def isatty(self) -> bool:
        return True


def test_resume_without_id_opens_the_list_and_esc_without_a_server_exits_0(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specmon.ui.screens import conversations

    save_one(store_path)
    seen: list[object] = []

    def fake_run(self: conversations.ConversationsApp) -> int | None:
        seen.append([s.title for s in self.search("")])
        return None  # Esc

    monkeypatch.setattr(conversations.ConversationsApp, "run", fake_run)
    monkeypatch.setattr("sys.stdin", _Tty())
    monkeypatch.setattr("sys.stdout", _Tty())
    assert main(["chat", "--resume"]) == 0
    assert seen == [["hello"]]


def test_resume_without_id_picks_from_the_list(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specmon.ui.screens import conversations

    cid = save_one(store_path)
    monkeypatch.setattr(conversations.ConversationsApp, "run", lambda self: cid)
    monkeypatch.setattr("sys.stdin", _Tty())
    monkeypatch.setattr("sys.stdout", _Tty())
    a = resumed_plan(args(resume=""))
    assert isinstance(a, ChatPlan)
    assert isinstance(a.resumed, SavedConversation) and a.resumed.id == cid
    assert a.attach == "http://127.0.0.1:9000"


def test_a_saved_server_address_that_is_not_a_url_is_one_line_not_a_connect(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The saved address is checked as `--attach URL` is on the command line: a broken (or
    # edited) database cannot hand the app an address that the argument check would refuse.
    with ConversationStore(store_path) as store:
        cid = store.save(
            SavedConversation((SavedTurn("q", "a"),), SavedServer("ftp://h:x", "qwen"))
        )
    assert resumed_plan(args(resume=str(cid))) == 2
    err = capsys.readouterr().err
    assert f"conversation {cid} has a bad server address" in err and err.count("\n") == 1


_RESUME_IN_CHILD = """
import json, sys
from specmon.cli.chat_cmd import ChatPlan, resumed_plan
from specmon.cli.chat_history_args import HistoryFlags
a = resumed_plan(ChatPlan(history=HistoryFlags(resume=sys.argv[1])))
r = a.resumed
print(json.dumps({"prompts": [t.prompt for t in r.turns], "attach": a.attach}))
"""


def _without_root_override() -> None:
    """In the child before it execs: take CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of its
    capability bounding set, so root's program honours permission bits like any owner's."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _child(argv: list[str], data_home: Path) -> subprocess.CompletedProcess[str]:
    source = str(Path(specmon.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(data_home),
        "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_without_root_override if os.geteuid() == 0 else None,
    )


def test_resume_and_export_read_a_store_in_a_read_only_directory(
    store_path: Path, tmp_path: Path
) -> None:
    """docs/chat.md: `--resume` and `--export-chat` only read the store. In a directory that
    cannot be written (a read-only file system, a 0555 directory) both failed with one line
    ("attempt to write a readonly database", or "unable to open database file"): a reader of a
    WAL file has SQLite make the `-shm` file beside it. They open the file read-only now, and
    immutable where its directory cannot be written.

    The directory is made 0555 for real. Root ignores permission bits (CAP_DAC_OVERRIDE), so the
    commands run in child processes, and as root each child drops CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from its capability bounding set before it execs: the bits then apply
    to it as to the directory's owner. A probe child checks that it really cannot write there
    (skipped where the capabilities cannot be dropped)."""
    cid = save_one(store_path)
    directory = store_path.parent
    assert sorted(p.name for p in directory.iterdir()) == ["chats.sqlite"]  # no -wal, -shm
    directory.chmod(0o555)
    try:
        probe = _child(["-c", f"open({str(directory / 'probe')!r}, 'w')"], tmp_path / "data")
        if probe.returncode == 0:
            pytest.skip("this process cannot be kept from writing a 0555 directory")
        assert "Permission denied" in probe.stderr
        export = _child(
            ["-m", "specmon", "chat", "--export-chat", str(cid), "-"], tmp_path / "data"
        )
        assert export.returncode == 0, export.stderr
        assert "hello" in export.stdout and "world" in export.stdout
        resume = _child(["-c", _RESUME_IN_CHILD, str(cid)], tmp_path / "data")
        assert resume.returncode == 0, resume.stderr
        assert json.loads(resume.stdout) == {
            "prompts": ["hello"],
            "attach": "http://127.0.0.1:9000",
        }
        assert sorted(p.name for p in directory.iterdir()) == ["chats.sqlite"]  # nothing made
    finally:
        directory.chmod(0o700)
