"""`specmon config` and the config file's defaults reaching watch and chat through `specmon`'s
own entry point (cli.main): a flag beats the file, the file beats the default, a bad file is one
line and exit 2."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from specmon.cli import chat_cmd, watch_cmd
from specmon.cli.main import main


@pytest.fixture
def config_file(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SPECMON_CONFIG", raising=False)
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "specmon" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """The arguments watch and chat were run with (nothing is started)."""
    seen: list[argparse.Namespace] = []

    def fake_run(args: argparse.Namespace) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(watch_cmd, "run", fake_run)
    monkeypatch.setattr(chat_cmd, "run", fake_run)
    return seen


def test_config_without_a_file_says_none_found(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert f"config file: none found (looked for {config_file})" in out
    assert "watch.attach" in out and "app.theme       specmon-dark  (default)" in out


def test_config_prints_the_file_and_each_settings_source(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text('[watch]\nattach = "http://gpu-box:8000"\ncanary = 300\n')
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"config file: {config_file}"
    assert '  watch.attach    "http://gpu-box:8000"  (file)' in out
    assert "  watch.canary    every 300 s  (file)" in out
    assert "  watch.interval  1 s  (default)" in out


def test_specmon_config_names_the_file_that_spec_config_points_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("[baseline]\ntok_s = 40\n")
    monkeypatch.setenv("SPECMON_CONFIG", str(other))
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert f"config file: {other}" in out and "baseline.tok_s  40  (file)" in out


@pytest.mark.parametrize("command", [["config"], ["watch"], ["chat"], ["replay", "absent.ndjson"]])
def test_a_bad_file_is_one_line_and_exit_2(
    config_file: Path,
    ran: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    config_file.write_text("[watch]\ninterval = 1\ncolour = 'red'\n")
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"specmon {command[0]}: {config_file}: unknown key watch.colour; "
        "[watch] takes: attach, interval, canary\n"
    )
    assert ran == []


def test_watch_and_chat_take_the_file_unless_a_flag_is_given(
    config_file: Path, ran: list[argparse.Namespace]
) -> None:
    config_file.write_text(
        '[watch]\nattach = ["http://gpu-box:8000"]\ninterval = 2.0\n'
        '[chat]\nattach = "http://chat-box:8000"\n[app]\ntheme = "specmon-light"\n'
    )
    assert main(["watch"]) == 0
    assert main(["watch", "--attach", "http://mine:1", "--theme", "nord"]) == 0
    assert main(["chat"]) == 0
    assert main(["chat", "--attach", "http://mine:2"]) == 0
    file_watch, flag_watch, file_chat, flag_chat = ran
    assert ([t.base for t in file_watch.targets], file_watch.interval) == (
        ["http://gpu-box:8000"],
        2.0,
    )
    assert file_watch.theme == "specmon-light"
    assert ([t.base for t in flag_watch.targets], flag_watch.interval, flag_watch.theme) == (
        ["http://mine:1"],
        2.0,
        "nord",
    )
    assert file_chat.attach == "http://chat-box:8000"  # a ChatPlan
    assert flag_chat.attach == "http://mine:2"


def test_watch_without_servers_or_file_says_how(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch"]) == 2
    assert "give --attach URL or --prometheus URL (or set [watch] attach" in capsys.readouterr().err


def test_watch_and_chat_help_mention_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("watch", "chat"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "config.toml" in capsys.readouterr().out


def test_web_checks_a_served_watch_with_the_config_file_applied(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from specmon.web import server

    started: list[object] = []
    monkeypatch.setattr(server, "start", lambda plan: started.append(plan) or 0)
    config_file.write_text("[watch]\ncanary = 1\n")
    with pytest.raises(SystemExit) as stop:
        main(["web", "watch"])
    assert stop.value.code == 2
    assert "watch.canary: must be a number of seconds from 10" in capsys.readouterr().err
    config_file.write_text('[watch]\nattach = "http://gpu-box:8000"\n')
    assert main(["web", "watch"]) == 0  # the tabs' watch finds its servers in the file
    assert len(started) == 1
