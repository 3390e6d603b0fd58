"""Where an API key goes (docs/web.md, docs/bad-input.md): only to the origins (scheme, host, port)
of the servers given with it on the command line. A server added while watching (the app's `a` key),
a metrics address on another origin and a redirect to another origin get no key; a Prometheus gets
the token of `--bearer-token-file`. Listeners on 127.0.0.1 record the headers of every request."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.component.header_listener import header_listener
from tests.support.waiting import wait_for

from specmon.core.credentials import KeyScope, origin_of
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sources.stream_client import ChatRequest, StreamClient

KEY = "sk-scope-test-0123456789"
WAIT_S = 30.0  # bound on waiting for requests; not a timing assertion
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _wait(predicate, what: str) -> None:
    wait_for(predicate, what, timeout=WAIT_S, interval=0.05)


def test_origins_are_scheme_host_and_port():
    assert origin_of("http://Box:8000/v1") == "http://box:8000"
    assert origin_of("box:8000") == "http://box:8000"
    assert origin_of("https://box") == "https://box:443"
    assert origin_of("http://u:p@box/x") == "http://box:80"
    assert origin_of("http://[::1]:9/") == "http://[::1]:9"
    assert origin_of("ftp://box") is None
    scope = KeyScope.of(KEY, ["http://a:8000"])
    assert scope.key_for("http://a:8000/metrics") == KEY
    assert scope.key_for("https://a:8000") is None  # another scheme is another origin
    assert scope.key_for("http://a:8001") is None
    assert scope.key_for("http://a.evil:8000") is None
    assert KeyScope.of(None, ["http://a:8000"]).bearer_for("http://a:8000") == {}


def test_a_server_added_while_watching_gets_no_key():
    """The issue's scenario: the owner watches A with a key; someone adds B (the `a` key in the
    app): B is identified and scraped, and never sees the key; A keeps getting it."""
    with header_listener() as a, header_listener() as b:
        config = SessionConfig(targets=(Target(a.url),), api_key=KEY, interval=0.2)
        session = CollectorProcess(config, SessionState)
        session.start()
        try:
            _wait(lambda: any(s.path == "/metrics" for s in a.requests()), "a scrape of A")
            session.add_target(Target(b.url))
            _wait(
                lambda: sum(s.path == "/metrics" for s in b.requests()) >= 3,
                "three scrapes of B",
            )
        finally:
            session.stop()
    assert {s.path for s in b.requests()} >= {"/version", "/v1/models", "/metrics"}
    assert b.authorizations() == []
    assert f"Bearer {KEY}" in a.authorizations()
    assert set(a.authorizations()) == {f"Bearer {KEY}"}


def test_the_environment_s_key_is_taken_once_at_the_command_line(monkeypatch):
    """$OPENAI_API_KEY (how `specmon web` hands the key to its app processes) is read by the
    command line only; a session given no key sends none, whatever the environment holds."""
    from argparse import Namespace

    from specmon.cli.args import api_key_of

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert api_key_of(Namespace(api_key=None)) == KEY
    assert api_key_of(Namespace(api_key="given")) == "given"
    assert api_key_of(Namespace(api_key=None), "served") == "served"
    with header_listener() as a:
        session = CollectorProcess(
            SessionConfig(targets=(Target(a.url),), api_key=None, interval=0.2), SessionState
        )
        session.start()
        try:
            _wait(lambda: any(s.path == "/metrics" for s in a.requests()), "a scrape of A")
        finally:
            session.stop()
    assert a.requests() and a.authorizations() == []


def test_a_metrics_address_on_another_origin_gets_no_key_and_one_on_the_same_origin_does():
    with header_listener() as a, header_listener() as elsewhere:
        targets = (Target(a.url, metrics_url=elsewhere.url + "/metrics"),)
        session = CollectorProcess(SessionConfig(targets, api_key=KEY, interval=0.2), SessionState)
        session.start()
        try:
            _wait(lambda: len(elsewhere.requests()) >= 2, "two scrapes")
        finally:
            session.stop()
        assert elsewhere.authorizations() == []
        same = (Target(a.url, metrics_url=a.url + "/metrics"),)
        session = CollectorProcess(SessionConfig(same, api_key=KEY, interval=0.2), SessionState)
        session.start()
        try:
            _wait(lambda: sum(s.path == "/metrics" for s in a.requests()) >= 2, "two scrapes")
        finally:
            session.stop()
    scraped = [s for s in a.requests() if s.path == "/metrics"]
    assert scraped and all(s.headers.get("authorization") == f"Bearer {KEY}" for s in scraped)


def test_a_redirect_to_another_origin_carries_no_key():
    """The chat request is redirected (307) to another origin: that origin gets the request but
    not the key (httpx drops Authorization on a cross-origin redirect; this holds it)."""
    with header_listener() as a, header_listener() as b:
        a.redirects["/v1/chat/completions"] = b.url + "/v1/chat/completions"

        async def ask() -> None:
            async with StreamClient(a.url, api_key=KEY) as client:
                await client.chat(ChatRequest("hi", model="m"), lambda _e: None)

        asyncio.run(ask())
        assert [s.path for s in b.requests()] == ["/v1/chat/completions"]
        assert b.authorizations() == []
        assert a.authorizations() == [f"Bearer {KEY}"]


def _watch(*args: str, command: str = "watch") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specmon", command, *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "OPENAI_API_KEY": KEY},
        timeout=120,
    )


def test_prometheus_gets_the_bearer_token_of_its_file_and_never_the_api_key(tmp_path):
    token = "prom-token-abcdef0123456789"
    file = tmp_path / "prom.token"
    file.write_text(token + "\n")
    with header_listener() as prom:
        done = _watch(prom.url, "--bearer-token-file", str(file), "--once", command="fleet")
    assert prom.requests(), done.stderr
    assert set(prom.authorizations()) == {f"Bearer {token}"}
    assert len(prom.authorizations()) == len(prom.requests())
    assert token not in done.stdout + done.stderr
    assert KEY not in str(prom.requests())


def test_a_bearer_token_file_that_cannot_be_read_is_one_line(tmp_path):
    done = _watch(
        "--prometheus", "http://127.0.0.1:9", "--bearer-token-file", str(tmp_path / "none")
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--bearer-token-file" in done.stderr
    done = _watch("--attach", "http://127.0.0.1:9", "--bearer-token-file", str(tmp_path / "x"))
    assert done.returncode == 2 and "goes with --prometheus" in done.stderr


def test_a_key_typed_for_an_added_server_goes_to_it_alone():
    with header_listener() as a, header_listener() as b:
        config = SessionConfig(targets=(Target(a.url),), api_key=KEY, interval=0.2)
        session = CollectorProcess(config, SessionState)
        session.start()
        try:
            session.add_target(Target(b.url, api_key="typed-for-b-0123456789"))
            _wait(lambda: sum(s.path == "/metrics" for s in b.requests()) >= 2, "B's scrapes")
        finally:
            session.stop()
    assert set(b.authorizations()) == {"Bearer typed-for-b-0123456789"}
    assert set(a.authorizations()) == {f"Bearer {KEY}"}
    assert "typed-for-b" not in repr(Target(b.url, api_key="typed-for-b-0123456789"))
