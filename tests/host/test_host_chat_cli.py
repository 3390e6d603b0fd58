"""`specmon chat --model` (host mode) end to end with a fake `vllm`: the same dry run as serve,
bad input, a failed start and a start that never gets ready (no terminal: reported at once), and
in a real terminal (tmux): startup view → chat → an answer → quit, with no process of the group
left; SIGTERM and SIGKILL of specmon; the recording's header; the log pane showing crafted log
text literally."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.host_mode import Terminal, alive, recorded_pids, wait_gone
from tests.support.specmon_cli import specmon_env

from specmon.cli.main import main
from specmon.core.redaction import REDACTED

needs_tmux = pytest.mark.terminal  # tmux: the terminal tier (tests/conftest.py skips it there)


def chat_args(fake: Path, *extra: str) -> list[str]:
    return [
        "chat", "--vllm", str(fake), "--model", "tiny", "--method", "ngram", "--port", "0",
        "--skip-arg-check", "--gpu", "none", *extra,
    ]  # fmt: skip


def test_dry_run_prints_exactly_what_serve_prints(fake_vllm, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secretsecret")
    common = [
        "--vllm", str(fake_vllm), "--preset", "rtx5090-gemma4-26b-dflash", "--n-spec", "10",
        "--dry-run", "--skip-arg-check", "--port", "8123",
        "--", "--max-model-len", "4096", "--api-key", "sk-live-abcdef",
    ]  # fmt: skip
    assert main(["serve", *common]) == 0
    served = capsys.readouterr().out
    assert main(["chat", *common]) == 0
    chatted = capsys.readouterr().out
    assert chatted == served
    command = chatted.strip().splitlines()[-1]
    assert command.startswith(f"{fake_vllm} serve cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit ")
    assert '"num_speculative_tokens":10' in command and "--max-model-len 4096" in command
    assert f"HF_TOKEN={REDACTED}" in chatted
    assert "sk-live-abcdef" not in chatted and "hf_secretsecret" not in chatted


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--attach", "http://127.0.0.1:9", "--draft", "d"], "--draft is for host mode"),
        (
            ["--attach", "http://127.0.0.1:9", "--n-spec", "4", "--dry-run"],
            "--n-spec, --dry-run are for host mode",
        ),
        (["--attach", "http://127.0.0.1:9", "--", "--max-model-len", "8"], "-- VLLM_ARGS is"),
        ([], "give --attach URL (a running server) or --model MODEL"),
        (["--model", "m", "--draft", "d", "--n-spec", "40"], "valid 1..15"),
        (["--preset", "nope"], "known presets: dgx-spark-gemma4-31b-dflash"),
        (["--model", "m", "--metrics-url", "http://x/metrics"], "--metrics-url is for --attach"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(fake_vllm, capsys, argv, words):
    host = [] if "--attach" in argv else ["--vllm", str(fake_vllm), "--skip-arg-check"]
    assert main(["chat", *host, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err
    assert len(err.splitlines()) == 1


def test_attach_with_model_still_names_the_model_to_chat_with():
    # --model with --attach keeps its meaning (the model to chat with): no host-mode error.
    from specmon.cli.main import build_parser
    from specmon.runtime.host_plan import HostFlags

    args = build_parser().parse_args(["chat", "--attach", "http://127.0.0.1:9", "--model", "x"])
    assert HostFlags.of(args).given() == []
    assert args.model == "x"


def run_chat(tmp_path: Path, fake: Path, mode: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specmon", *chat_args(fake, *extra)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=specmon_env(FAKE_VLLM_MODE=mode),
        timeout=300,
    )


def test_an_oom_start_without_a_terminal_reports_the_cause_and_exits_1(fake_vllm, tmp_path):
    done = run_chat(tmp_path, fake_vllm, "oom")
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert "vLLM did not start: the server exited with code 1 before it was ready" in err
    assert "torch.OutOfMemoryError: CUDA out of memory" in err
    assert "likely cause: the GPU ran out of memory" in err
    assert "try: lower --gpu-memory-utilization" in err
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


def test_never_ready_without_a_terminal_times_out_with_the_tail(fake_vllm, tmp_path):
    done = run_chat(tmp_path, fake_vllm, "never", "--ready-timeout", "3")
    assert done.returncode == 1, done.stderr
    assert "vLLM did not start: not ready (/health 200) after 3 s" in done.stderr
    assert "GPU KV cache size: 1,048,576 tokens" in done.stderr  # the tail
    assert "vLLM stopped (process group" in done.stderr
    pids = recorded_pids(tmp_path)
    assert pids and not any(alive(pid) for pid in pids)


# ------------------------------------------------------------------ in a terminal (tmux)


def open_chat(tmp_path: Path, fake: Path, mode: str, *extra: str) -> Terminal:
    command = shlex.join([sys.executable, "-m", "specmon", *chat_args(fake, *extra)])
    env = specmon_env(FAKE_VLLM_MODE=mode)
    env = {k: v for k, v in env.items() if k in ("PYTHONPATH", "FAKE_VLLM_MODE")}
    env |= {
        "FAKE_VLLM_PIDS": str(tmp_path / "pids"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    return Terminal(command, tmp_path / "exit", env)


@needs_tmux
def test_start_ready_chat_log_pane_quit_leaves_no_process(fake_vllm, tmp_path):
    recording = tmp_path / "chat.ndjson"
    term = open_chat(
        tmp_path, fake_vllm, "ok", "--record", str(recording), "--env", "MY_TOKEN=tok-12345678",
        "--", "--api-key", "sk-fake-secret-123",
    )  # fmt: skip
    try:
        term.wait_for(lambda: "model tiny · n_spec 4" in term.screen(), "the connected chat")
        pgid = recorded_pids(tmp_path)[0]  # the fake's API server leads its group
        term.type("say hello")
        term.key("Enter")
        term.wait_for(lambda: "echo-hello from the fake." in term.screen(), "the answer")
        # The log pane over the chat: the server's own lines, crafted escapes shown literally.
        term.key("C-l")
        term.wait_for(lambda: "Application startup complete." in term.screen(), "the log pane")
        screen = term.screen()
        assert "Application startup complete." in screen
        assert "␛]0;pwned-title␇␛[31m[bold red]markup[/bold red]␛[0m" in screen
        assert "pwned-title" not in term.title()
        term.key("Escape")
        term.wait_for(lambda: "vLLM log:" not in term.screen(), "the log pane closed")
        term.key("C-q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == 0
        assert f"vLLM stopped (process group {pgid} gone)" in term.screen()
    finally:
        term.close()
    assert wait_gone(pgid, timeout_s=5)
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
    lines = recording.read_text().splitlines()
    header = json.loads(lines[0])
    host = header["extra"]["host"]
    assert header["model"] == "tiny" and header["method"] == "ngram" and header["n_spec"] == 4
    assert header["vllm_version"] == "0.0.1-fake"
    assert host["argv"][1:3] == ["serve", "tiny"]
    assert "--api-key" in host["command"] and REDACTED in host["command"]
    assert host["env"]["NO_COLOR"] == "1" and host["env"]["MY_TOKEN"] == REDACTED
    assert host["log_file"].endswith(".log")
    text = recording.read_text()
    assert "sk-fake-secret-123" not in text and "tok-12345678" not in text


@needs_tmux
def test_an_oom_start_shows_the_cause_in_the_app_and_exits_1_after_quit(fake_vllm, tmp_path):
    term = open_chat(tmp_path, fake_vllm, "oom")
    try:
        # The cause and the tail in the pane (the Log widget may draw its lines a frame later).
        term.wait_for(
            lambda: "CUDA out of memory" in term.screen() and "likely cause:" in term.screen(),
            "the failure in the app",
        )
        screen = term.screen()
        assert "vLLM did not start: the server exited with code 1" in screen
        assert "likely cause: the GPU ran out of memory" in screen
        assert "torch.OutOfMemoryError: CUDA out of memory" in screen  # the tail, in the pane
        assert term.exit_code() is None  # the app waits for the user
        term.key("C-q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == 1
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


@needs_tmux
def test_never_ready_shows_the_timeout_in_the_app(fake_vllm, tmp_path):
    term = open_chat(tmp_path, fake_vllm, "never", "--ready-timeout", "4")
    try:
        term.wait_for(lambda: "KV cache sized" in term.screen(), "the startup progress")
        assert "elapsed" in term.screen() and "state/specmon/logs/vllm-" in term.screen()
        term.wait_for(lambda: "not ready (/health 200) after 4 s" in term.screen(), "the timeout")
        term.key("C-q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == 1
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


@needs_tmux
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_to_specmon_stops_the_whole_group(fake_vllm, tmp_path, how):
    # ignore-term: only the group SIGKILL (after the grace) or the watchdog can stop it.
    mode = "ignore-term" if how == signal.SIGKILL else "ok"
    term = open_chat(tmp_path, fake_vllm, mode)
    try:
        term.wait_for(lambda: "model tiny · n_spec 4" in term.screen(), "the connected chat")
        pgid = recorded_pids(tmp_path)[0]
        (pid,) = term.children("specmon chat")
        os.kill(pid, how)
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        if how != signal.SIGKILL:
            assert term.exit_code() == 128 + how  # 143, 129: stopped cleanly
        # SIGKILL: the watchdog sends TERM (ignored here), then KILL after the 10 s grace.
        assert wait_gone(pgid, timeout_s=60)
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


@needs_tmux
@pytest.mark.parametrize(("key", "status"), [("C-q", 0), ("C-c", 130)])
def test_quitting_during_the_start_stops_the_group(fake_vllm, tmp_path, key, status):
    """ctrl+q quits (0); Ctrl-C, a key in the app too, quits as interrupted (130, as SIGINT)."""
    term = open_chat(tmp_path, fake_vllm, "never")
    try:
        term.wait_for(lambda: "KV cache sized" in term.screen(), "the startup progress")
        pgid = recorded_pids(tmp_path)[0]
        term.key(key)
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        assert term.exit_code() == status
        assert f"vLLM stopped (process group {pgid} gone)" in term.screen()
    finally:
        term.close()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
