"""`specmon serve` end to end with a fake `vllm`: dry run, bad input, quit by signal, SIGKILL of
specmon (the watchdog), a failed start, the recording's header."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.host_mode import alive, output_match, recorded_pids, wait_gone
from tests.support.specmon_cli import specmon_env

from specmon.cli.main import main
from specmon.core.recording_format import CODE_LOG
from specmon.core.redaction import REDACTED


def start_serve(tmp_path: Path, fake: Path, *extra: str, mode: str = "ok") -> tuple:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    args = [
        sys.executable, "-m", "specmon", "serve", "--vllm", str(fake), "--model", "tiny",
        "--method", "ngram", "--port", "0", "--skip-arg-check", "--gpu", "none",
        "--interval", "0.2", *extra,
    ]  # fmt: skip
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(
            args, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
            env=specmon_env(FAKE_VLLM_MODE=mode),
        )  # fmt: skip
    return proc, out, err


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_quit_by_signal_stops_the_whole_group(fake_vllm, tmp_path, how):
    recording = tmp_path / "session.ndjson"
    proc, out, err = start_serve(
        tmp_path, fake_vllm, "--record", str(recording), "--env", "MY_TOKEN=tok-12345678",
        "--baseline", "88.5",
        "--", "--api-key", "sk-fake-secret-123", "--max-model-len", "1024",
    )  # fmt: skip
    try:
        pgid = int(output_match(err, r"process group (\d+)\)", proc))
        output_match(out, r"ready: http://127\.0\.0\.1:\d+", proc)
        assert "[startup] ready (/health 200)" in err.read_text()
        assert len(recorded_pids(tmp_path)) >= 1
        proc.send_signal(how)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 128 + how
    assert wait_gone(pgid, timeout_s=5)  # already gone when specmon exits
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
    assert f"vLLM stopped (process group {pgid} gone)" in err.read_text()
    lines = recording.read_text().splitlines()
    header = json.loads(lines[0])
    host = header["extra"]["host"]
    assert header["method"] == "ngram" and header["n_spec"] == 4 and header["model"] == "tiny"
    assert (header["baseline_tok_s"], header["baseline_from"]) == (88.5, "given")  # replay's
    assert host["argv"][1:3] == ["serve", "tiny"]
    assert "--api-key" in host["command"] and REDACTED in host["command"]
    assert host["env"]["NO_COLOR"] == "1" and host["env"]["MY_TOKEN"] == REDACTED
    assert host["log_file"].endswith(".log")
    text = recording.read_text()
    assert "sk-fake-secret-123" not in text and "tok-12345678" not in text
    logged = [json.loads(line)[2]["line"] for line in lines[1:] if json.loads(line)[1] == CODE_LOG]
    assert any("Loading weights took" in line for line in logged)
    assert any("Application startup complete" in line for line in logged)


def test_sigkill_of_specmon_still_stops_the_group(fake_vllm, tmp_path):
    proc, out, err = start_serve(tmp_path, fake_vllm, mode="ignore-term")
    try:
        pgid = int(output_match(err, r"process group (\d+)\)", proc))
        output_match(out, r"ready: ", proc)
        proc.kill()
        proc.wait(timeout=30)
        # The watchdog: TERM (ignored by this fake), then KILL after the 10 s grace period.
        assert wait_gone(pgid, timeout_s=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


def test_a_failed_start_prints_the_tail_and_the_cause_and_exits_1(fake_vllm, tmp_path):
    proc, _out, err = start_serve(tmp_path, fake_vllm, mode="nonc")
    assert proc.wait(timeout=120) == 1
    text = err.read_text()
    assert "vLLM did not start: the server exited with code 1" in text
    assert "last " in text and "non-causal attention not supported" in text
    assert "likely cause: no attention backend" in text
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


def test_a_server_that_dies_while_serving_ends_the_dashboard_with_the_cause(fake_vllm, tmp_path):
    proc, out, err = start_serve(tmp_path, fake_vllm, mode="dies")
    try:
        output_match(out, r"ready: ", proc)
        assert proc.wait(timeout=120) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert "vLLM stopped: the server exited with code 1 while serving" in text
    assert "likely cause: the engine process died" in text


def test_dry_run_prints_the_command_and_environment(fake_vllm, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secretsecret")
    code = main(
        [
            "serve", "--vllm", str(fake_vllm), "--preset", "rtx5090-gemma4-26b-dflash",
            "--n-spec", "10", "--dry-run", "--skip-arg-check", "--port", "8123",
            "--", "--max-model-len", "4096", "--api-key", "sk-live-abcdef",
        ]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    command = out.strip().splitlines()[-1]
    assert command.startswith(f"{fake_vllm} serve cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit ")
    assert "--host 127.0.0.1 --port 8123" in command
    assert "--max-model-len 4096" in command and "2048" not in command  # the flag won
    assert '"num_speculative_tokens":10' in command
    assert "VLLM_USE_FLASHINFER_SAMPLER=0" in out and "NO_COLOR=1" in out
    assert f"HF_TOKEN={REDACTED}" in out
    assert "sk-live-abcdef" not in out and "hf_secretsecret" not in out
    assert "seed" in out and "proven on" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--preset", "nope"], "known presets: dgx-spark-gemma4-31b-dflash"),
        (["--model", "m", "--draft", "d", "--method", "ngram"], "methods that take --draft"),
        (["--model", "m", "--draft", "d", "--n-spec", "40"], "valid 1..15"),
        (["--draft", "d"], "--model MODEL is needed"),
        (["--model", "m", "--", "--port", "1"], "give --port to specmon"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(fake_vllm, capsys, argv, words):
    assert main(["serve", "--vllm", str(fake_vllm), "--skip-arg-check", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err
    assert len(err.splitlines()) == 1


def test_no_vllm_prints_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["serve", "--model", "m"]) == 2
    assert "pip install 'specmon[host]'" in capsys.readouterr().err


def test_a_port_in_use_is_refused_before_launch(fake_vllm, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["serve", "--vllm", str(fake_vllm), "--model", "m", "--port", str(port)])
    assert code == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


# ------------------------------------------------------------------ on a terminal: the app


def open_serve(tmp_path: Path, fake: Path, mode: str, *extra: str):
    import shlex

    from tests.support.host_mode import Terminal

    argv = [
        sys.executable, "-m", "specmon", "serve", "--vllm", str(fake), "--model", "tiny",
        "--method", "ngram", "--port", "0", "--skip-arg-check", "--gpu", "none", *extra,
    ]  # fmt: skip
    env = {
        "PYTHONPATH": specmon_env()["PYTHONPATH"],
        "FAKE_VLLM_MODE": mode,
        "FAKE_VLLM_PIDS": str(tmp_path / "pids"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    return Terminal(shlex.join(argv), tmp_path / "exit", env)


needs_tmux = pytest.mark.terminal  # tmux: the terminal tier (tests/conftest.py skips it there)


@needs_tmux
def test_on_a_terminal_serve_opens_the_apps_dashboard_with_the_log_pane(fake_vllm, tmp_path):
    recording = tmp_path / "serve.ndjson"
    term = open_serve(tmp_path, fake_vllm, "ok", "--record", str(recording))
    try:
        term.wait_for(lambda: "method ngram · n_spec 4" in term.screen(), "the dashboard")
        pgid = recorded_pids(tmp_path)[0]
        assert "─acceptance─" in term.screen()
        term.key("l")
        term.wait_for(lambda: "Application startup complete." in term.screen(), "the log pane")
        assert "vLLM log:" in term.screen()
        assert "␛]0;pwned-title␇␛[31m[bold red]markup[/bold red]␛[0m" in term.screen()
        assert "pwned-title" not in term.title()
        term.key("l")
        term.wait_for(lambda: "vLLM log:" not in term.screen(), "the log pane closed")
        term.key("q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == 0
        assert f"vLLM stopped (process group {pgid} gone)" in term.screen()
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
    lines = recording.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["method"] == "ngram" and header["extra"]["host"]["argv"][1:3] == ["serve", "tiny"]
    logged = [json.loads(line)[2]["line"] for line in lines[1:] if json.loads(line)[1] == CODE_LOG]
    assert any("Application startup complete" in line for line in logged)
    assert any("crafted: " in line for line in logged)


@needs_tmux
def test_on_a_terminal_a_failed_start_shows_the_cause_and_exits_1_after_quit(fake_vllm, tmp_path):
    term = open_serve(tmp_path, fake_vllm, "nonc")
    try:
        # The cause and the tail in the pane (the Log widget may draw its lines a frame later).
        term.wait_for(
            lambda: (
                "non-causal attention not supported" in term.screen()
                and "likely cause:" in term.screen()
            ),
            "the failure in the app",
        )
        assert "likely cause: no attention backend" in term.screen()
        term.key("q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == 1
        assert "vLLM did not start: the server exited with code 1" in term.screen()  # stderr
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
