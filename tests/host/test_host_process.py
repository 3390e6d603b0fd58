"""sources.host.process with a fake `vllm`: failure reports, readiness, stopping the whole group."""

from __future__ import annotations

import getpass
import tempfile
from pathlib import Path

import pytest
from tests.support.host_mode import alive, launch_fake, recorded_pids
from tests.support.waiting import wait_for

from specmon.core.redaction import REDACTED
from specmon.core.startup_log import StartupPhase
from specmon.sources.host.process import HostedServer, HostStartError


def test_a_server_that_dies_with_an_oom_trace_reports_the_cause_and_tail(
    fake_vllm, tmp_path, monkeypatch
):
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "oom")
    with pytest.raises(HostStartError) as info:
        server.wait_ready(timeout_s=120)
    error = info.value
    assert error.returncode == 1
    assert error.cause is not None and error.cause.kind == "cuda-oom"
    assert 0 < len(error.tail) <= 50
    assert error.tail[-1].startswith("RuntimeError: Engine core initialization failed")
    report = error.report()
    assert "exited with code 1" in report
    assert "likely cause: the GPU ran out of memory" in report
    assert str(error.log_path) in report
    assert server.stop().survivors == ()


def test_the_log_file_and_sinks_get_every_line_with_secrets_masked(
    fake_vllm, tmp_path, monkeypatch
):
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "ok")
    lines: list[str] = []
    server.add_line_sink(lines.append, replay=True)
    phases = []
    try:
        ready = server.wait_ready(timeout_s=120, on_progress=lambda p: phases.append(p.phase))
    finally:
        report = server.stop()
    assert ready.phase is StartupPhase.READY
    assert phases == sorted(phases) and phases[-1] is StartupPhase.READY
    assert ready.vllm_version == "0.0.1-fake"
    assert report.survivors == ()
    text = server.log_path.read_text()
    assert "sk-fake-secret-123" not in text and REDACTED in text
    assert "NO_COLOR=1" in text
    assert lines == text.splitlines()  # replayed + later lines: none lost, none twice
    assert "Application startup complete." in lines[-1]


def test_the_environments_token_never_reaches_the_log_file(fake_vllm, tmp_path, monkeypatch):
    """A server that prints $HF_TOKEN bare (no `key=` shape to find it by): its value is a known
    secret of the environment the server runs with, kept out of the log file and the sinks."""
    token = "plain-token-value-7731"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("FAKE_VLLM_ECHO_TOKEN", "1")
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "ok")
    lines: list[str] = []
    server.add_line_sink(lines.append, replay=True)
    try:
        server.wait_ready(timeout_s=120)
    finally:
        server.stop()
    text = server.log_path.read_text()
    assert "hub user [REDACTED] logged in" in text
    assert token not in text and not [line for line in lines if token in line]


def test_never_ready_times_out_with_the_tail_and_leaves_no_process(
    fake_vllm, tmp_path, monkeypatch
):
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "never")
    with pytest.raises(HostStartError) as info:
        server.wait_ready(timeout_s=3)
    assert "not ready (/health 200) after 3 s" in str(info.value)
    assert any("KV cache size" in line for line in info.value.tail)
    assert info.value.returncode is None
    report = server.stop()
    assert report.signals == ("TERM",)
    assert report.survivors == ()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(
    fake_vllm, tmp_path, monkeypatch
):
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "ignore-term", grace_s=1.0)
    server.wait_ready(timeout_s=120)
    wait_for(lambda: len(recorded_pids(tmp_path)) == 2, "the server and its child", timeout=30)
    report = server.stop()
    assert report.signals == ("TERM", "group TERM", "group KILL")
    assert report.survivors == ()
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
    assert server.stop().signals == ()  # idempotent


def test_the_watchdog_stops_the_group_when_its_pipe_closes(fake_vllm, tmp_path, monkeypatch):
    """What happens when specmon is SIGKILLed: the watchdog's pipe closes."""
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "ignore-term", grace_s=1.0)
    server.wait_ready(timeout_s=120)
    wait_for(lambda: len(recorded_pids(tmp_path)) == 2, "the server and its child", timeout=30)
    watchdog = server._watchdog
    assert watchdog is not None and watchdog.stdin is not None
    scratch = left_in_scratch(server)
    watchdog.stdin.close()  # as the kernel does when specmon dies
    wait_for(lambda: not server.members(), "the group to end", timeout=30)
    watchdog.wait(timeout=30)
    assert not any(alive(pid) for pid in recorded_pids(tmp_path))
    assert not scratch.exists()  # the watchdog removed the server's temporary folder
    server.stop()


def left_in_scratch(server: HostedServer) -> Path:
    """The server's temporary folder, once the fake has left vLLM's files in it (the
    distributed-init file its log names), checked to be outside the usual temporary folder."""
    wait_for(lambda: "distributed_init_method" in "".join(server.tail()), "the init file's line")
    line = next(line for line in server.tail() if "distributed_init_method" in line)
    init_file = Path(line.split("file://", 1)[1].split()[0])
    assert server.scratch is not None and init_file.parent == server.scratch
    assert init_file.exists() and Path(init_file.read_text()).is_dir()
    assert server.scratch.parent == Path(tempfile.gettempdir())
    return server.scratch


def test_the_servers_temporary_files_go_with_it(fake_vllm, tmp_path, monkeypatch):
    """vLLM leaves its IPC sockets and distributed-init file in its temporary folder; the server
    gets a folder of its own, removed with it, and torch's compile cache keeps its usual place:
    TORCHINDUCTOR_CACHE_DIR, and a link from the folder for what torch keeps under TMPDIR
    whatever that says (its precompiled headers)."""
    temp = tmp_path / "temp"  # the usual temporary folder, for this test
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cache = temp / f"torchinductor_{getpass.getuser()}"
    (cache / "precompiled_headers").mkdir(parents=True)
    (cache / "precompiled_headers" / "kept.h.gch").write_text("built once")
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "ok")
    server.wait_ready(timeout_s=120)
    scratch = left_in_scratch(server)
    raw = (Path("/proc") / str(server.pid) / "environ").read_bytes()
    env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    assert env["TMPDIR"] == str(scratch)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(cache)
    # torch's default_cache_dir() in the server: TMPDIR/torchinductor_<user>, the same cache
    assert (scratch / cache.name / "precompiled_headers" / "kept.h.gch").read_text() == "built once"
    assert server.stop().survivors == ()
    assert not scratch.exists()
    assert (cache / "precompiled_headers" / "kept.h.gch").read_text() == "built once"
    assert sorted(p.name for p in temp.iterdir()) == [cache.name]  # nothing else left
