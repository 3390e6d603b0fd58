"""`specmon web`'s command line: what it serves, where, and what it refuses before serving."""

from __future__ import annotations

import shlex
import socket

import pytest

from specmon.cli import app_runner
from specmon.cli.main import build_parser, main
from specmon.cli.web_cmd import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    WebArgsError,
    bind,
    is_loopback,
    plan_from_args,
    public_url_for,
    split_web_options,
)


def plan(*words: str):
    return plan_from_args(build_parser().parse_args(["web", *words]))


def test_without_a_command_it_serves_the_demo_on_loopback_port_8000():
    p = plan()
    assert (p.app, p.app_args, p.host, p.port) == ("demo", (), DEFAULT_HOST, DEFAULT_PORT)
    assert DEFAULT_HOST == "127.0.0.1"


def test_web_options_are_its_own_wherever_they_stand():
    p = plan(
        "watch", "--attach", "http://a:8000", "--port", "9001", "--host=::1", "--interval", "2"
    )
    assert p.app == "watch"
    assert p.app_args == ("--attach", "http://a:8000", "--interval", "2")
    assert (p.host, p.port) == ("::1", 9001)
    assert plan().max_tabs == 8
    assert plan("demo", "--max-tabs=2").max_tabs == 2
    before = plan("--port", "9002", "demo", "--speed", "3")
    assert (before.app, before.app_args, before.port) == ("demo", ("--speed", "3"), 9002)


def test_after_a_double_dash_everything_is_the_commands():
    found, rest = split_web_options(["--speed", "2", "--", "--port", "7"])
    assert found == {}
    assert rest == ["--speed", "2", "--port", "7"]


def test_a_web_option_without_its_value_is_refused():
    with pytest.raises(WebArgsError, match="--port needs a value"):
        split_web_options(["--speed", "2", "--port"])


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (("chat",), "serves demo, watch, replay"),
        (("demo", "--port", "http"), "--port must be a number"),
        (("demo", "--port", "70000"), "--port must be from 0 to 65535"),
        (("demo", "--max-tabs", "0"), "--max-tabs must be at least 1"),
        (("demo", "--max-tabs", "many"), "--max-tabs must be a number"),
    ],
)
def test_what_cannot_be_served_is_a_one_line_error(words, message):
    with pytest.raises(WebArgsError, match=message):
        plan(*words)


def test_the_app_command_survives_the_shell_literally():
    """textual-serve runs the command through /bin/sh: arguments with spaces, quotes or shell
    syntax must reach the app unchanged (and never run as shell code)."""
    p = plan("watch", "--attach", "http://h:1/?a=b c", "--gpu", "x'; touch /nonexistent #")
    words = shlex.split(p.command("/usr/bin/python3"))
    assert words[0] == "exec"  # the shell becomes the app: its pid leads the app's group
    assert words[1:] == [
        "/usr/bin/python3",
        "-m",
        "specmon",
        "watch",
        "--attach",
        "http://h:1/?a=b c",
        "--gpu",
        "x'; touch /nonexistent #",
    ]


@pytest.mark.parametrize("form", [("--api-key", "sk-secret-1"), ("--api-key=sk-secret-1",)])
def test_an_api_key_goes_to_the_apps_environment_never_to_a_command_line(form):
    p = plan("watch", "--attach", "http://h:1", *form, "--interval", "2")
    assert p.api_key == "sk-secret-1"
    assert p.app_args == ("--attach", "http://h:1", "--interval", "2")
    assert "sk-secret-1" not in p.command("/usr/bin/python3")
    assert "sk-secret-1" not in p.title
    assert "sk-secret-1" not in repr(p)


def test_a_secret_in_another_option_is_scrubbed_from_the_title():
    p = plan("watch", "--attach", "http://h:1", "--", "--token", "tok-secret-2")
    assert "tok-secret-2" not in p.title and "REDACTED" in p.title


@pytest.mark.parametrize(
    ("words", "why"),
    [
        (["web", "demo", "--json"], "--json prints data"),
        (["web", "watch", "--attach", "http://127.0.0.1:9", "--once"], "--once prints one"),
        (["web", "demo", "--record", "x.ndjson"], "every browser tab runs its own app"),
        (["web", "replay", "no-such-recording.ndjson"], "no such recording"),
    ],
)
def test_options_that_would_not_open_the_app_are_refused_before_serving(capsys, words, why):
    assert main(words) == 2
    err = capsys.readouterr().err
    assert why in err
    assert err.startswith("specmon web: ") and err.count("\n") == 1


def test_the_served_commands_own_mistakes_are_reported_by_its_parser(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["web", "watch"])  # watch needs --attach
    assert stop.value.code == 2
    assert "--attach" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.20", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_or_not(host, loopback):
    assert is_loopback(host) is loopback


def test_public_url_of_the_listening_address():
    assert public_url_for("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert public_url_for("::1", 8000) == "http://[::1]:8000"
    assert public_url_for("localhost", 81) == "http://localhost:81"
    assert public_url_for("0.0.0.0", 8000) == f"http://{socket.gethostname()}:8000"


def test_a_port_in_use_is_a_one_line_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WebArgsError) as error:
            bind("127.0.0.1", port)
        assert str(error.value) == f"port {port} on 127.0.0.1 is in use"


def test_port_zero_takes_a_free_port_on_loopback():
    sock = bind("127.0.0.1", 0)
    try:
        host, port = sock.getsockname()[:2]
        assert host == "127.0.0.1" and port > 0
    finally:
        sock.close()


def test_the_app_opens_under_textual_serves_web_driver_without_a_terminal(monkeypatch):
    """Under pytest stdin/stdout are not a terminal: no app, unless textual-serve's driver is
    set (it is, in every process `specmon web` starts for a page)."""
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert app_runner.wants_app() is False
    monkeypatch.setenv("TEXTUAL_DRIVER", app_runner.WEB_DRIVER)
    assert app_runner.wants_app() is True
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    assert app_runner.wants_app() is False
