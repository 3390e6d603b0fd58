"""`specmon web`'s command line: what it serves, where, and what it refuses before serving."""

from __future__ import annotations

import shlex
import socket

import pytest

from specmon.cli.main import build_parser, main
from specmon.cli.web_cmd import plan_from_args
from specmon.runtime import terminal as app_runner
from specmon.sources.addresses import is_loopback
from specmon.web.net import BindError, bind, public_url_for
from specmon.web.plan import (
    ARGV_SECRETS_ENV,
    DEFAULT_HOST,
    DEFAULT_PORT,
    WebArgsError,
    restore_argv_secrets,
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
    p = plan("demo", "--speed", "2", "--", "--port", "7")
    assert p.port == DEFAULT_PORT
    assert p.app_args == ("--speed", "2", "--port", "7")


def test_an_option_after_the_command_overrides_the_same_one_before_it():
    p = plan("--port", "9000", "--max-tabs", "3", "demo", "--port", "9001")
    assert (p.port, p.max_tabs) == (9001, 3)


def test_what_cannot_be_served_is_a_one_line_error():
    with pytest.raises(WebArgsError, match="serves demo, watch, replay"):
        plan("chat")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (("demo", "--port", "http"), "argument --port: not a port number: 'http'"),
        (("demo", "--port", "70000"), "argument --port: port must be 0..65535"),
        (("--port", "70000", "demo"), "argument --port: port must be 0..65535"),
        (("demo", "--max-tabs", "0"), "argument --max-tabs: must be at least 1"),
        (("demo", "--max-tabs", "many"), "argument --max-tabs: not a whole number: 'many'"),
        (("demo", "--speed", "2", "--port"), "argument --port: expected one argument"),
    ],
)
def test_a_bad_web_option_anywhere_is_argparses_one_line_error(capsys, words, message):
    with pytest.raises(SystemExit) as stop:
        plan(*words)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("specmon web: error: ") and message in err.splitlines()[0]


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
        with pytest.raises(BindError) as error:
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


# -------------------------------------------------------------- the token (docs/web.md)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (("--no-token",), "add --allow-any-local-user to confirm"),
        (("--no-token", "--allow-any-local-user", "--host", "0.0.0.0"), "not a loopback"),
        (("--allow-any-local-user",), "goes with --no-token"),
        (("--no-token", "--allow-any-local-user", "--token-file", "t"), "do not go together"),
    ],
)
def test_serving_without_a_token_is_refused_unless_loopback_and_confirmed(words, message):
    with pytest.raises(WebArgsError, match=message):
        plan(*words)


def test_no_token_on_loopback_with_the_confirmation_is_accepted_anywhere_on_the_line():
    p = plan("demo", "--speed", "2", "--allow-any-local-user", "--no-token")
    assert p.no_token and p.app_args == ("--speed", "2")
    assert plan("--token-file", "/x/t", "demo").token_file == "/x/t"


def test_url_credentials_go_to_the_apps_environment_never_to_a_command_line():
    p = plan(
        "watch",
        "--attach",
        "http://alice:pw-secret-3@h:1/v1",
        "--metrics-url=https://bob:pw-secret-4@m:2/metrics",
        "--interval",
        "2",
    )
    assert p.app_args == (
        "--attach",
        "http://h:1/v1",
        "--metrics-url=https://m:2/metrics",
        "--interval",
        "2",
    )
    for secret in ("pw-secret-3", "pw-secret-4", "alice"):
        assert secret not in p.command("/usr/bin/python3")
        assert secret not in p.title and secret not in repr(p)
    # The app puts them back where they were, from its environment (then drops the variable).
    import json

    environ = {ARGV_SECRETS_ENV: json.dumps([list(x) for x in p.url_secrets])}
    restored = restore_argv_secrets([p.app, *p.app_args], environ)
    assert restored == [
        "watch",
        "--attach",
        "http://alice:pw-secret-3@h:1/v1",
        "--metrics-url=https://bob:pw-secret-4@m:2/metrics",
        "--interval",
        "2",
    ]
    assert ARGV_SECRETS_ENV not in environ
    assert restore_argv_secrets(["watch"], {ARGV_SECRETS_ENV: "not json"}) == ["watch"]
    assert restore_argv_secrets(["watch"], {ARGV_SECRETS_ENV: "[[7, 1]]"}) == ["watch"]


def test_a_new_token_file_is_the_owners_only_and_a_shared_one_is_refused(tmp_path):
    import os
    import stat

    from specmon.web.auth import (
        MIN_TOKEN_CHARS,
        WebAuthError,
        read_token_file,
        token_from_file,
    )

    file = tmp_path / "t"
    token, where, remove = token_from_file(file, 8000)
    assert where == file and not remove and len(token) >= MIN_TOKEN_CHARS
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert file.read_text().strip() == token
    assert token_from_file(file, 8000)[0] == token  # kept: the address can stay the same
    file.chmod(0o640)
    with pytest.raises(WebAuthError, match="can be read by others"):
        read_token_file(file)
    short = tmp_path / "short"
    short.write_text("abc")
    os.chmod(short, 0o600)
    with pytest.raises(WebAuthError, match="at least"):
        read_token_file(short)
    with pytest.raises(WebAuthError, match="cannot read"):
        read_token_file(tmp_path / "missing" / "x")


def test_the_guard_knows_this_servers_origins_only():
    from specmon.web.auth import Guard, allowed_origins

    origins = allowed_origins("http://127.0.0.1:8000", "127.0.0.1", 8000, loopback=True)
    guard = Guard(token=None, cookie="c", origins=origins)
    assert guard.origin_allowed("http://localhost:8000")
    assert guard.origin_allowed("http://127.0.0.1:8000")
    assert guard.origin_allowed(None)  # not a browser
    assert not guard.origin_allowed("http://evil.example:8000")
    assert not guard.origin_allowed("http://127.0.0.1:8001")
    assert not guard.origin_allowed("null")
    assert guard.host_allowed("127.0.0.1:8000") and guard.host_allowed("localhost:8000")
    assert not guard.host_allowed("evil.example:8000")  # DNS rebinding
    assert not guard.host_allowed(None)


# ------------------------------------------------------------------ secrets off the apps' argv


@pytest.mark.parametrize(
    "words",
    [
        ("--api-ke", "sk-abbrev-secret-7"),
        ("--api", "sk-abbrev-secret-7"),
        ("--api-ke=sk-abbrev-secret-7",),
        ("--apikey", "sk-abbrev-secret-7"),
        ("--api_key=sk-abbrev-secret-7",),
        ("--", "--api-k", "sk-abbrev-secret-7"),
    ],
)
def test_an_api_key_option_not_written_in_full_is_refused_without_its_value(capsys, words):
    """`--api-ke KEY` was passed to the app's command line (where `ps` shows it), and the app's
    parser read it as --api-key. Now it is one line naming the option, never the value."""
    code = main(["web", "watch", "--attach", "http://h:1", *words])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("specmon web: --ap"), err
    assert "write --api-key in full" in err
    assert "sk-abbrev-secret-7" not in err


def test_credentials_without_a_scheme_go_to_the_apps_environment_too():
    """`--attach alice:pw@host:port` (the scheme is optional) put the password on the app's
    command line; a password holding `@` left its tail there."""
    p = plan(
        "watch",
        "--attach",
        "alice:pw-secret-5@h:1",
        "--metrics-url=bob:pw-secret-6@m:2/metrics",
        "--gpu",
        "http://carol:pw@secret-8@d:3/metrics",
    )
    assert p.app_args == (
        "--attach",
        "h:1",
        "--metrics-url=m:2/metrics",
        "--gpu",
        "http://d:3/metrics",
    )
    command = p.command("/usr/bin/python3")
    for secret in ("pw-secret-5", "pw-secret-6", "secret-8", "alice", "bob", "carol"):
        assert secret not in command and secret not in p.title and secret not in repr(p)
    import json

    environ = {ARGV_SECRETS_ENV: json.dumps([list(x) for x in p.url_secrets])}
    assert restore_argv_secrets([p.app, *p.app_args], environ) == [
        "watch",
        "--attach",
        "alice:pw-secret-5@h:1",
        "--metrics-url=bob:pw-secret-6@m:2/metrics",
        "--gpu",
        "http://carol:pw@secret-8@d:3/metrics",
    ]


def test_an_address_without_credentials_is_left_as_it_is():
    p = plan("watch", "--attach", "h:1", "--metrics-url", "http://m:2/a@b", "--interval", "2")
    assert p.app_args == ("--attach", "h:1", "--metrics-url", "http://m:2/a@b", "--interval", "2")
    assert p.url_secrets == ()


def test_the_default_token_file_honours_xdg_state_home(tmp_path, monkeypatch):
    """Without a private $XDG_RUNTIME_DIR the token went to ~/.local/state whatever
    $XDG_STATE_HOME said. Now: $XDG_STATE_HOME/specmon (a relative one is ignored, as XDG says),
    the file 0600, its directory 0700 even when it was there before with others' access."""
    import stat

    from specmon.web.auth import default_token_file, token_from_file

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    assert default_token_file(8000) == state / "specmon" / "web-8000.token"
    (state / "specmon").mkdir(parents=True, mode=0o755)
    (state / "specmon").chmod(0o755)
    token, file, remove = token_from_file(None, 8000)
    assert file == state / "specmon" / "web-8000.token" and remove
    assert file.read_text().strip() == token
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    assert default_token_file(8000) == tmp_path / "home" / ".local/state/specmon/web-8000.token"
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # a private runtime directory first
    assert default_token_file(8000) == runtime / "specmon" / "web-8000.token"
