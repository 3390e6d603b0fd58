"""The host-mode views in the Textual app (Pilot, no vLLM): the startup view (progress from the
log, elapsed time, log path, the server's lines shown literally), ready → the chat or the
dashboard with the log pane on l / ctrl+l, a failed start (cause and exactly the last lines), a
server that dies while serving; and the pieces: progress marks, HostedServer.lines_after,
AppHost's adapter."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.support.host_mode import launch_fake
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for, wait_for_app

from specmon.core.startup_log import StartupFailed, StartupPhase, StartupProgress
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.chat import ChatScreen
from specmon.ui.screens.log import LogScreen
from specmon.ui.screens.startup import (
    StartupScreen,
    elapsed_words,
    progress_lines,
)
from specmon.ui.screens.watch import DashboardScreen
from specmon.ui.widgets.log_pane import LogPane

SIZE = (140, 45)
CRAFTED = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m [bold]not bold[/bold] [@click=app.quit]q[/]"
SHOWN = "␛]0;pwned␇␛[31mred␛[0m [bold]not bold[/bold] [@click=app.quit]q[/]"


class FakeHost:
    """A HostWatch driven by the test: lines, progress and the start's outcome."""

    def __init__(self) -> None:
        self.base_url = "http://127.0.0.1:8123"
        self.log_path = "/logs/vllm-test.log"
        self.title = "Starting vLLM: tiny (ngram, K=4)"
        self.lines: list[str] = []
        self.now = 0.0
        self.state = StartupProgress()
        self.go = threading.Event()
        self.outcome: StartupFailed | None = None
        self.died: StartupFailed | None = None
        self.exit_on_failure = False

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        return len(self.lines), self.lines[seen:]

    def progress(self) -> StartupProgress:
        return self.state

    def elapsed_s(self) -> float:
        return self.now

    def wait_ready(self, cancel: threading.Event) -> StartupFailed | None:
        while not self.go.wait(0.05):
            if cancel.is_set():
                return StartupFailed("startup cancelled", (), self.log_path)
        return self.outcome

    def exit_failure(self) -> StartupFailed | None:
        return self.died


def kv_progress() -> StartupProgress:
    return StartupProgress(
        phase=StartupPhase.KV_CACHE,
        vllm_version="0.32.0",
        weights_s=3.0,
        weights_gib=1.2,
        kv_cache_tokens=2048,
    )


def oom_failure(lines: int = 50) -> StartupFailed:
    tail = (*(f"line {i}" for i in range(lines - 1)), "torch.OutOfMemoryError: CUDA out")
    return StartupFailed(
        reason="the server exited with code 1 before it was ready",
        tail=tail,
        log_path="/logs/vllm-test.log",
        cause="the GPU ran out of memory",
        hint="lower --gpu-memory-utilization",
        seen_in="torch.OutOfMemoryError: CUDA out",
    )


async def test_the_startup_view_shows_progress_elapsed_path_and_literal_log_lines():
    host = FakeHost()
    host.state = kv_progress()
    host.now = 75.0
    host.lines = ["INFO starting", CRAFTED]
    app = SpecmonApp(FakePort(), host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: SHOWN in screen_text(app))
        text = screen_text(app)
        assert isinstance(app.screen, StartupScreen)
        assert "Starting vLLM: tiny (ngram, K=4)" in text
        assert "✓ initialising the engine: vLLM 0.32.0" in text
        assert "✓ weights loaded: 1.20 GiB, 3.0 s" in text
        assert "▶ KV cache sized: 2,048 tokens" in text
        assert "· ready (/health 200)" in text
        assert "elapsed 1 min 15 s" in text and "log /logs/vllm-test.log" in text
        # A line that arrives later is appended; the screen follows the log.
        host.lines.append("INFO Application startup complete.")
        host.now = 76.0
        await wait_for_app(pilot, lambda: "Application startup complete." in screen_text(app))
        await wait_for_app(pilot, lambda: "elapsed 1 min 16 s" in screen_text(app))
        assert app.title != "pwned"
        host.go.set()


async def test_ready_opens_the_chat_and_ctrl_l_toggles_the_servers_log():
    host = FakeHost()
    host.lines = ["INFO hello from vLLM", CRAFTED]
    app = SpecmonApp(FakePort(), host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: isinstance(app.screen, StartupScreen))
        host.go.set()
        await wait_for_app(pilot, lambda: isinstance(app.screen, ChatScreen))
        assert not any(isinstance(s, StartupScreen) for s in app.screen_stack)
        host.lines.append("INFO a line after ready")
        await pilot.press("ctrl+l")
        await wait_for_app(pilot, lambda: isinstance(app.screen, LogScreen))
        await wait_for_app(pilot, lambda: "a line after ready" in screen_text(app))
        text = screen_text(app)
        assert "vLLM log: /logs/vllm-test.log" in text
        assert SHOWN in text and "hello from vLLM" in text
        await pilot.press("ctrl+l")
        await wait_for_app(pilot, lambda: isinstance(app.screen, ChatScreen))
        assert app.host_failure is None


async def test_the_dashboard_after_ready_toggles_the_log_with_l():
    host = FakeHost()
    host.lines = ["INFO dashboard log line"]
    host.go.set()
    app = SpecmonApp(FakePort(), mode="watch", host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("l")
        await wait_for_app(pilot, lambda: "dashboard log line" in screen_text(app))
        assert isinstance(app.screen, LogScreen)
        await pilot.press("l")
        await wait_for_app(pilot, lambda: isinstance(app.screen, DashboardScreen))


async def test_without_a_hosted_server_l_says_there_is_no_log():
    app = SpecmonApp(FakePort(), mode="watch")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert any(
            "specmon did not start this server" in str(n.message) for n in app._notifications
        )


async def test_a_failed_start_shows_the_cause_and_exactly_the_last_50_lines():
    host = FakeHost()
    host.state = kv_progress()
    host.lines = [f"early {i}" for i in range(120)]
    host.outcome = oom_failure(50)
    host.go.set()
    app = SpecmonApp(FakePort(), host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: app.host_failure is not None)
        await wait_for_app(pilot, lambda: "likely cause" in screen_text(app))
        text = screen_text(app)
        assert "vLLM did not start: the server exited with code 1 before it was ready" in text
        assert "likely cause: the GPU ran out of memory" in text
        assert "try: lower --gpu-memory-utilization" in text
        assert "✗ KV cache sized" in text
        assert "elapsed" not in text
        pane = app.screen.query_one(LogPane)
        assert list(pane.lines) == list(host.outcome.tail)
        await pilot.pause(0.5)  # a later pull does not bring the earlier lines back
        assert list(pane.lines) == list(host.outcome.tail)
        assert pane.max_scroll_y > 0 and pane.scroll_y == pane.max_scroll_y  # ends on the cause
        assert isinstance(app.screen, StartupScreen)  # stays until the user quits
        assert app.host_failure == host.outcome


async def test_a_server_that_dies_while_serving_shows_why_over_the_chat():
    host = FakeHost()
    host.go.set()
    app = SpecmonApp(FakePort(), host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: isinstance(app.screen, ChatScreen))
        host.died = StartupFailed(
            reason="the server exited with code 1 while serving",
            tail=("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue",),
            log_path=host.log_path,
            cause="the engine process died during startup",
            after_ready=True,
        )
        await wait_for_app(pilot, lambda: app.host_failure is not None)
        await wait_for_app(pilot, lambda: "vLLM stopped:" in screen_text(app))
        assert "EngineDeadError" in screen_text(app)


async def test_the_log_pane_is_bounded():
    host = FakeHost()
    host.lines = [f"line {i}" for i in range(30)]
    from textual.app import App, ComposeResult

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LogPane(host, max_lines=10)

    app = One()
    async with app.run_test(size=(60, 20)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for_app(pilot, lambda: len(pane.lines) > 0)
        assert list(pane.lines) == [f"line {i}" for i in range(20, 30)]


def test_progress_marks_follow_the_phase():
    ready = progress_lines(StartupProgress(phase=StartupPhase.READY))
    assert all(mark == "✓" for mark, _ in ready)
    assert ready[-1] == ("✓", "ready (/health 200)")
    loading = dict((w, m) for m, w in progress_lines(StartupProgress(StartupPhase.LOADING_WEIGHTS)))
    assert loading["initialising the engine"] == "✓"
    assert loading["loading weights"] == "▶"
    assert loading["capturing CUDA graphs"] == "·"
    failed = progress_lines(StartupProgress(StartupPhase.LOADING_WEIGHTS), failed=True)
    assert ("✗", "loading weights") in failed


def test_elapsed_words():
    assert elapsed_words(0.4) == "0 s"
    assert elapsed_words(59.9) == "59 s"
    assert elapsed_words(61) == "1 min 01 s"


def test_lines_after_gives_only_new_lines_and_the_count(fake_vllm, tmp_path, monkeypatch):
    server = launch_fake(fake_vllm, tmp_path, monkeypatch, "never")
    try:
        wait_for(
            lambda: "KV cache size" in " ".join(server.tail()), "the KV cache line", timeout=30
        )
        total, first = server.lines_after(0)
        assert total == len(first) and first[0].endswith("serving model tiny")
        assert server.lines_after(total) == (total, [])
        again, last_two = server.lines_after(total - 2)
        assert again == total and last_two == first[-2:]
    finally:
        server.stop()


def test_app_host_adapts_the_server_and_reports_a_failure(fake_vllm, tmp_path, monkeypatch):
    import argparse

    from specmon.cli.host_args import add_host_arguments
    from specmon.runtime.host_launch import AppHost, launch_or_exit
    from specmon.runtime.host_plan import plan_host

    monkeypatch.setenv("FAKE_VLLM_MODE", "oom")
    parser = argparse.ArgumentParser()
    add_host_arguments(parser)
    args = parser.parse_args(
        ["--vllm", str(fake_vllm), "--model", "tiny", "--method", "ngram", "--port", "0",
         "--skip-arg-check", "--log-file", str(tmp_path / "v.log")]
    )  # fmt: skip
    plan = plan_host(args, say=lambda _s: None)
    server = launch_or_exit(plan, "chat", say=lambda _s: None)
    assert not isinstance(server, int)
    ticks = iter([10.0, 14.5])
    host = AppHost(server, plan, 60.0, clock=lambda: next(ticks))
    try:
        assert host.title == "Starting vLLM: tiny (ngram, K=4)"
        assert host.log_path == str(Path(tmp_path / "v.log"))
        assert host.elapsed_s() == 4.5
        failure = host.wait_ready(threading.Event())
        assert failure is not None and failure.cause == "the GPU ran out of memory"
        assert failure.tail[-1].startswith("RuntimeError: Engine core initialization failed")
        assert not failure.after_ready
        assert host.exit_failure() is not None and host.exit_failure().after_ready
    finally:
        server.stop()


async def test_off_a_terminal_a_death_while_serving_ends_the_app_at_once():
    host = FakeHost()
    host.exit_on_failure = True
    host.go.set()
    app = SpecmonApp(FakePort(), host=host)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_app(pilot, lambda: isinstance(app.screen, ChatScreen))
        host.died = StartupFailed("the server exited with code 1 while serving", (), "x.log")
        await wait_for_app(pilot, lambda: not app.is_running)
    assert app.host_failure == host.died


def test_what_host_mode_knows_completes_what_the_server_says():
    from specmon.core.events import SessionInfo
    from specmon.runtime.monitor import complete_info

    said = SessionInfo(server="http://h:1", model="tiny", vllm_version="0.32.0", extra={"a": 1})
    known = SessionInfo(
        server="http://h:1", model="/models/target", draft_model="/models/d", method="draft_model",
        n_spec=4, vllm_version="0.31", gpu="H100", extra={"host": {"preset": None}},
    )  # fmt: skip
    merged = complete_info(said, known)
    assert merged.model == "tiny" and merged.vllm_version == "0.32.0"  # the server's own words
    assert (merged.draft_model, merged.method, merged.n_spec) == ("/models/d", "draft_model", 4)
    assert merged.gpu == "H100" and merged.extra == {"a": 1, "host": {"preset": None}}
    assert complete_info(said, None) is said
