"""No API key, Authorization header or token reaches a recording."""

from __future__ import annotations

import gzip

import pytest

from specmon.core.clock import FakeClock
from specmon.core.events import (
    GpuSampled,
    RequestEnded,
    ServerLogLine,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.recording_format import redact_text, redact_url
from specmon.core.redaction import Scrubber
from specmon.runtime.recorder import Recorder, environment_secrets
from specmon.sources.recording_player import read_recording

PLANTED = "sk-planted0123456789SECRET"
ENV_TOKEN = "envtok-7f3a9c1e5b"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (f"non-default args: {{'api_key': ['{PLANTED}'], 'model': 'm'}}", "'model': 'm'"),
        (f"vllm serve m --api-key {PLANTED} --port 8000", "--port 8000"),
        ("vllm serve m --api-key=abcdef12 --port 8000", "--port 8000"),
        ("Authorization: Bearer abc.def.ghi", "Authorization"),
        ("HF_TOKEN=hf_abcdefghijkl VLLM_API_KEY=xyz12345", "HF_TOKEN="),
        ('{"api_key": "abcdef12", "n": 1}', '"n": 1'),
        ("GET http://user:hunter2@host:8000/metrics", "host:8000/metrics"),
    ],
)
def test_redact_text_removes_secrets_by_shape(line, kept):
    out = redact_text(line)
    for secret in (PLANTED, "abcdef12", "abc.def.ghi", "hf_abcdefghijkl", "xyz12345", "hunter2"):
        assert secret not in out
    assert "[REDACTED]" in out
    assert kept in out


def test_redact_text_keeps_ordinary_numbers():
    line = "max_num_batched_tokens=2048, num_spec_tokens=8, SpeculativeConfig(method='dflash')"
    assert redact_text(line) == line


def test_environment_secrets_finds_key_and_token_variables():
    env = {"OPENAI_API_KEY": "k-123456", "MY_SERVICE_TOKEN": ENV_TOKEN, "PATH": "/usr/bin"}
    assert set(environment_secrets(env)) == {"k-123456", ENV_TOKEN}


def test_planted_secrets_never_reach_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_DEPLOY_TOKEN", ENV_TOKEN)
    path = tmp_path / "s.ndjson"
    info = SessionInfo(
        server=f"http://admin:{PLANTED}@gpu-box:8000",
        extra={"command": f"vllm serve m --api-key {PLANTED}"},
    )
    with Recorder(path, info, clock=FakeClock(), secrets=["literal-key-42"]) as rec:
        rec.write(ServerLogLine(1.0, "s", f"args: api_key={PLANTED} token {ENV_TOKEN}"))
        rec.write(ServerLogLine(1.1, "s", "Authorization: Bearer literal-key-42"))
        rec.write(RequestEnded(2.0, "r", "failed", error="401 for key literal-key-42"))
        rec.write(ServerStatusChanged(3.0, "s", "down", detail=f"env {ENV_TOKEN}"))
        rec.write(StreamChunk(4.0, "r", text="the key literal-key-42 in model text"))
    raw = path.read_text()
    for secret in (PLANTED, ENV_TOKEN, "literal-key-42"):
        assert secret not in raw
    rec_read = read_recording(path)
    assert rec_read.info.server == "http://gpu-box:8000"
    assert len(rec_read.events) == 5


def test_a_key_typed_for_an_added_server_never_reaches_the_file(tmp_path):
    """The `a` dialog's key (a server added while recording) is scrubbed from then on, like the
    command line's: an error that echoes it is written without it."""
    path = tmp_path / "s.ndjson"
    typed = "typed-for-b-0123456789"
    with Recorder(path, SessionInfo(server="http://a:8000"), clock=FakeClock()) as rec:
        rec.add_secret(typed)
        rec.write(ServerStatusChanged(1.0, "http://b:8000", "down", detail=f"401: bad key {typed}"))
        rec.write(RequestEnded(2.0, "r", "failed", error=f"Incorrect API key provided: {typed}"))
    raw = path.read_text()
    assert typed not in raw
    assert "401: bad key" in raw


@pytest.mark.parametrize("name", ["s.ndjson", "s.ndjson.gz"])
def test_a_url_password_and_the_environments_token_never_reach_the_file(
    tmp_path, monkeypatch, name
):
    """The server URL's password is a known secret like the key: gone from the header, every
    URL (the GPU exporter's too) and every text, model text included; so is $HF_TOKEN."""
    password, token = "s3cret-Pw0rd", "hf_abcDEF0123456789ghiJKL"
    monkeypatch.setenv("HF_TOKEN", token)
    server = f"http://alice:{password}@127.0.0.1:8123"
    path = tmp_path / name
    with Recorder(path, SessionInfo(server=server), clock=FakeClock()) as rec:
        rec.write(GpuSampled(0.5, f"http://alice:{password}@gpu-box:9400/metrics", ()))
        rec.write(StreamChunk(1.0, "r", text=f"you said {password} and {token}"))
        rec.write(RequestEnded(2.0, "r", "failed", error=f"login {password!r} refused"))
        rec.write(ServerLogLine(3.0, server, f"token is {token}"))
    raw = path.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    assert password.encode() not in raw and token.encode() not in raw
    recording = read_recording(path)
    assert recording.info.server == "http://127.0.0.1:8123"
    chunk = next(e for e in recording.events if isinstance(e, StreamChunk))
    assert chunk.text == "you said [REDACTED] and [REDACTED]"


def test_a_password_holding_an_at_sign_leaves_nothing_behind():
    url = "http://alice:p@ss-w0rd@host:8000/v1"
    assert redact_url(url) == "http://host:8000/v1"
    assert "ss-w0rd" not in redact_text(f"GET {url}")


def test_arguments_and_environment_are_written_without_their_secrets():
    scrub = Scrubber.of()
    argv = ["vllm", "serve", "m", "--api-key", "plain-value-1", "--hf-token=tok-22", "--port", "8"]
    assert scrub.argv(argv) == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "[REDACTED]",
        "--hf-token=[REDACTED]",
        "--port",
        "8",
    ]
    env = {"HF_TOKEN": "x", "DB_PASSWORD": "y", "MY_SECRET": "z", "PATH": "/bin"}
    assert scrub.env(env) == {k: "[REDACTED]" for k in env if k != "PATH"} | {"PATH": "/bin"}


def test_stored_arguments_and_environment_lose_their_secrets(tmp_path):
    """The header's extra fields as a caller may give them, unmasked: an argument list with
    `--api-key VALUE` as two arguments and an environment with secret names."""
    path = tmp_path / "s.ndjson"
    extra = {
        "argv": ["vllm", "serve", "m", "--api-key", "plainvalue99"],
        "env": {"DEPLOY_SECRET": "zz-top-9", "NO_COLOR": "1"},
    }
    with Recorder(path, SessionInfo(extra=extra), clock=FakeClock()):
        pass
    raw = path.read_text()
    assert "plainvalue99" not in raw and "zz-top-9" not in raw
    header = read_recording(path).info.extra
    assert header["argv"][-2:] == ["--api-key", "[REDACTED]"]
    assert header["env"] == {"DEPLOY_SECRET": "[REDACTED]", "NO_COLOR": "1"}
