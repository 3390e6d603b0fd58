"""`--theme` on chat, demo and watch: parsed by one shared helper, specmon-dark by default (the
same name as ui/themes.py's default), and handed to the app, which resolves it."""

from __future__ import annotations

import argparse
import types

import pytest

from specmon.cli import chat_cmd, demo_cmd, watch_cmd
from specmon.cli.main import build_parser
from specmon.cli.session_setup import DEFAULT_THEME
from specmon.ui import demo_run, themes, watch_output

COMMANDS = (
    ["chat", "--attach", "http://127.0.0.1:8000"],
    ["demo"],
    ["watch", "--attach", "http://127.0.0.1:8000"],
)


def test_the_cli_default_is_the_themes_default() -> None:
    assert DEFAULT_THEME == themes.DEFAULT_THEME


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_theme_is_parsed_with_the_default(argv: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(argv).theme == "specmon-dark"
    assert parser.parse_args([*argv, "--theme", "mine.toml"]).theme == "mine.toml"


class _Recorder:
    def __init__(self) -> None:
        self.kwargs: dict[str, object] = {}

    def app(self, *args: object, **kwargs: object) -> object:
        self.kwargs = kwargs
        return types.SimpleNamespace(host_failure=None)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder()
    monkeypatch.setattr("specmon.ui.app.SpecmonApp", rec.app)
    monkeypatch.setattr("specmon.ui.app_runner.run_app", lambda app, port, **_kw: 0)
    return rec


def test_each_command_hands_its_theme_to_the_app(recorder: _Recorder) -> None:
    parser = build_parser()
    args = parser.parse_args([*COMMANDS[0], "--theme", "specmon-light"])
    assert chat_cmd.run(chat_cmd.plan_from(args)) == 0
    assert recorder.kwargs["theme"] == "specmon-light"
    args = parser.parse_args(["demo", "--theme", "specmon-high-contrast"])
    assert demo_run._app("http://127.0.0.1:9", demo_cmd.plan_from(args).show) == 0
    assert recorder.kwargs["theme"] == "specmon-high-contrast"
    args = parser.parse_args([*COMMANDS[2], "--theme", "nord"])
    assert isinstance(args, argparse.Namespace)
    plan = watch_cmd.plan_from(args)
    assert isinstance(plan, watch_cmd.WatchPlan)
    assert watch_output._watch_app(plan) == 0
    assert recorder.kwargs["theme"] == "nord"
