"""The real-vLLM harness itself, on stand-in processes: stopping whole groups, start failures,
the guard that stops a server when the run dies, the order of the tier's tests, and the skip/CI
gate. No vLLM needed, so these run fast everywhere."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
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
from tests.support.waiting import wait_for

from specmon.sources.host.process import inductor_cache_dir

ROOT = Path(__file__).resolve().parents[2]


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


def test_a_server_that_exits_reports_the_last_lines_of_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    temp = tmp_path / "temp"  # the usual temporary folder, for this test
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    # Like vLLM, it leaves a file in its temporary folder.
    vllm.write_text(
        '#!/bin/sh\ntouch "$TMPDIR/vllm_dist_1"\n'
        "for i in $(seq 1 80); do echo log line $i; done\nexit 3\n"
    )
    vllm.chmod(vllm.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ServerStartError) as error:
        start_server(SPECS["ngram"], bin_dir / "python", TinyModels(tmp_path), tmp_path)
    message = str(error.value)
    assert "exited with code 3" in message
    assert "log line 80" in message
    assert f"log line {80 - LOG_TAIL_LINES + 1}\n" in message
    assert f"log line {80 - LOG_TAIL_LINES}\n" not in message
    # Its own temporary folder went with it; torch's compile cache stays (make_scratch).
    assert [p.name for p in temp.iterdir()] == [Path(inductor_cache_dir()).name]


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


@dataclass
class StandIn:
    """What the pool reads of a collected test: its id and its fixtures."""

    nodeid: str
    fixturenames: list[str] = field(default_factory=list)


@dataclass
class CountedServer:
    """A server that only counts as running: what the pool needs of a VllmServer."""

    name: str
    url: str = "http://127.0.0.1:1"
    log_path: str = "log"
    started_s: float = 0.0
    running: bool = True

    def is_running(self) -> bool:
        return self.running

    def stop(self) -> None:
        self.running = False

    def rss_bytes(self) -> int:
        return 0


def test_each_server_starts_once_and_other_tests_keep_their_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Collection order mixes the servers folder by folder; even with one server alive at a time
    # each starts once, the tests of one server keep their order, the others their slots.
    needs = ["vllm_ngram", "", "vllm_plain", "vllm_python", "vllm_ngram", "", "vllm_plain"]
    items = [StandIn(f"t{i}", [need] if need else []) for i, need in enumerate(needs)]
    fixtures.group_by_server(items)  # type: ignore[arg-type]
    order = [item.nodeid for item in items]
    assert order == ["t3", "t1", "t0", "t4", "t2", "t5", "t6"]
    monkeypatch.setattr(fixtures, "start_server", lambda spec, *_: CountedServer(spec.name))
    pool = fixtures.ServerPool(max_alive=1, log=lambda _: None)
    pool.python, pool.models, pool.log_dir = tmp_path, TinyModels(tmp_path), tmp_path
    pool.plan(items)  # type: ignore[arg-type]
    for index, item in enumerate(items):
        needed = fixtures.needed_specs(item)  # type: ignore[arg-type]
        for name in needed:
            pool.acquire(name, index, needed)
        pool.release_after(index)
    assert [name for name, _, _ in pool.starts] == ["ngram", "plain"]


FAKE_VLLM = """\
import http.server, subprocess, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
subprocess.Popen(["sleep", "300"])  # a child in the group, like vLLM's engine core
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

RUN = """\
import signal, sys, time
from pathlib import Path
# A run Ctrl-C can stop, as one started from a terminal: a suite started in the background of a
# non-interactive shell (`bash .ci/run &` in a script) inherits SIGINT ignored, and so would this.
signal.signal(signal.SIGINT, signal.default_int_handler)
from tests.real_vllm import server as harness
from tests.real_vllm.server import SPECS, start_server
from tests.real_vllm.tiny_models import TinyModels
harness.STOP_TERM_WAIT_S = 0.5  # the stand-in's child outlives its leader: do not wait 15 s
tmp = Path(sys.argv[1])
server = start_server(SPECS["plain"], tmp / "bin" / "python", TinyModels(tmp), tmp)
(tmp / "pgid.tmp").write_text(str(server.pid))
(tmp / "pgid.tmp").rename(tmp / "pgid")
if sys.argv[2] == "stop":
    server.stop()
    (tmp / "guard").write_text(str(server.guard.returncode))
else:
    time.sleep(300)
"""


def fake_vllm(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    vllm.chmod(vllm.stat().st_mode | stat.S_IXUSR)


def run_a_server(tmp_path: Path, then: str) -> tuple[subprocess.Popen[bytes], int]:
    """A run (a child python, as pytest would be) that starts a stand-in server and then stops
    it itself (`then="stop"`) or waits to be killed; its server's process group."""
    fake_vllm(tmp_path)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    run = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path), then], env=env)
    pgid = int(
        wait_for(
            lambda: (tmp_path / "pgid").exists() and (tmp_path / "pgid").read_text(),
            "the stand-in server to be ready",
            detail=lambda: f"run: {run.poll()}",
        )
    )
    return run, pgid


@pytest.mark.parametrize(
    "how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
)
def test_a_run_killed_leaves_no_server_behind(tmp_path: Path, how: signal.Signals):
    """However the run ends without stopping its server (pytest ends on SIGINT after its own
    teardown; SIGTERM and SIGKILL end it at once), the guard stops the server's group."""
    run, pgid = run_a_server(tmp_path, "wait")
    try:
        assert len(wait_for(lambda: len(live(pgid)) >= 2 and live(pgid), "the server's child")) >= 2
        run.send_signal(how)
        assert run.wait(timeout=30) == -how
        wait_for(lambda: not live(pgid), f"the server's group to end after the run's {how.name}")
    finally:
        for pid in live(pgid):
            os.kill(pid, signal.SIGKILL)


def test_a_server_stopped_by_the_run_releases_its_guard(tmp_path: Path):
    run, pgid = run_a_server(tmp_path, "stop")
    assert run.wait(timeout=60) == 0
    assert (tmp_path / "guard").read_text() == "0"  # the guard ended when released, not killed
    assert live(pgid) == []
