"""The real-vLLM harness itself, on stand-in processes: stopping whole groups, start failures,
and the skip/CI gate. No vLLM needed, so these run fast everywhere."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from tests.real_vllm import fixtures
from tests.real_vllm.server import (
    LOG_TAIL_LINES,
    SPECS,
    ServerStartError,
    VllmServer,
    group_members,
    start_server,
)
from tests.real_vllm.tiny_models import TinyModels


@pytest.fixture(autouse=True)
def short_stop_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins whose leader dies on SIGTERM but whose children do not: do not wait 15 s."""
    monkeypatch.setattr("tests.real_vllm.server.STOP_TERM_WAIT_S", 0.5)
    monkeypatch.setattr("tests.real_vllm.server.STOP_GROUP_TERM_WAIT_S", 0.5)


def live(pgid: int) -> list[int]:
    return [pid for pid, state in group_members(pgid) if state != "Z"]


def group_process(tmp_path: Path, script: str) -> VllmServer:
    """A process group like vLLM's: a leader with children, in its own session."""
    process = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    return VllmServer(SPECS["plain"], "http://127.0.0.1:1", 1, tmp_path / "log", [], process)


def test_stop_ends_the_leader_and_its_children(tmp_path: Path):
    server = group_process(tmp_path, "sleep 300 & sleep 300 & wait")
    for _ in range(50):
        if len(live(server.pid)) >= 3:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert len(live(server.pid)) >= 3
    server.stop()
    assert live(server.pid) == []


def test_stop_kills_children_that_ignore_sigterm(tmp_path: Path):
    server = group_process(tmp_path, "trap '' TERM; sh -c \"trap '' TERM; sleep 300\" & wait")
    for _ in range(50):
        if len(live(server.pid)) >= 3:
            break
        subprocess.run(["sleep", "0.1"], check=True)
    server.stop()
    assert live(server.pid) == []


def test_a_server_that_exits_reports_the_last_lines_of_its_log(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text("#!/bin/sh\nfor i in $(seq 1 80); do echo log line $i; done\nexit 3\n")
    vllm.chmod(vllm.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ServerStartError) as error:
        start_server(SPECS["ngram"], bin_dir / "python", TinyModels(tmp_path), tmp_path)
    message = str(error.value)
    assert "exited with code 3" in message
    assert "log line 80" in message
    assert f"log line {80 - LOG_TAIL_LINES + 1}\n" in message
    assert f"log line {80 - LOG_TAIL_LINES}\n" not in message


def test_skip_variable_skips_locally(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(fixtures.SKIP_ENV, "1")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=fixtures.SKIP_ENV):
        fixtures.gate()


def test_skip_variable_is_an_error_in_ci(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(fixtures.SKIP_ENV, "1")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="mandatory in CI"):
        fixtures.gate()


def test_no_skip_variable_lets_the_tier_run(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(fixtures.SKIP_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    fixtures.gate()


def test_pool_stops_the_server_needed_again_latest(tmp_path: Path):
    pool = fixtures.ServerPool(max_alive=2)
    pool.uses = {"ngram": [0, 9], "plain": [1, 3], "draft_same": [2]}
    pool.servers = {
        "ngram": group_process(tmp_path, "sleep 300"),
        "plain": group_process(tmp_path, "sleep 300"),
    }
    pool._make_room(index=2, keep={"draft_same"})
    assert not pool.servers["ngram"].is_running()  # next needed at 9, later than plain (3)
    assert pool.servers["plain"].is_running()
    pool.release_after(3)  # plain's last use
    assert not pool.servers["plain"].is_running()
    pool.stop_all()
