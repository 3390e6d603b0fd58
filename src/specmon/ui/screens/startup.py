"""The startup view of host mode: how far the hosted `vllm serve` got (read from its log: engine,
weights, KV cache, CUDA-graph capture, API server, ready), the time since launch, the log file's
path, and the server's own log lines (`LogPane`). Ready means /health answered 200; then the app
replaces this screen by the chat or the dashboard. On a failed start (the server exited, or was
not ready within the timeout) it shows the reason, the likely cause and the last 50 log lines,
and the app exits non-zero once the user quits.

The view reads a `HostWatch` (the cli adapts the hosted server to it); waiting runs in a worker
thread, the screen redraws from `progress()` at `REDRAW_HZ`. Nothing here starts or stops vLLM.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from specmon.core.startup_log import PHASE_WORDS, StartupPhase, StartupProgress
from specmon.ui.formatting import visible
from specmon.ui.host import HostWatch, StartupFailed
from specmon.ui.messages import HostFailed, HostReady
from specmon.ui.styles import theme_styles
from specmon.ui.widgets.log_pane import LogPane

REDRAW_HZ = 4.0


def _phase_detail(phase: StartupPhase, p: StartupProgress) -> str:
    parts: list[str] = []
    if phase is StartupPhase.ENGINE_INIT and p.vllm_version:
        parts.append(f"vLLM {p.vllm_version}")
    elif phase is StartupPhase.WEIGHTS_LOADED:
        if p.weights_gib is not None:
            parts.append(f"{p.weights_gib:.2f} GiB")
        if p.weights_s is not None:
            parts.append(f"{p.weights_s:.1f} s")
    elif phase is StartupPhase.KV_CACHE:
        if p.kv_cache_tokens is not None:
            parts.append(f"{p.kv_cache_tokens:,} tokens")
        if p.kv_cache_gib is not None:
            parts.append(f"{p.kv_cache_gib:.2f} GiB")
        if p.max_concurrency is not None:
            parts.append(f"max concurrency {p.max_concurrency:g}x")
    elif phase is StartupPhase.GRAPH_CAPTURE and p.graph_capture_s is not None:
        parts.append(f"{p.graph_capture_s:.1f} s")
    elif phase is StartupPhase.API_STARTING and p.url:
        parts.append(p.url)
    return ", ".join(parts)


def progress_lines(p: StartupProgress, *, failed: bool = False) -> list[tuple[str, str]]:
    """(mark, words) per startup phase: ✓ passed, ▶ the current one (✗ when the start failed),
    · not reached. Phases vLLM skips (no CUDA graphs on CPU) are passed when a later one came."""
    lines: list[tuple[str, str]] = []
    for phase in StartupPhase:
        if phase is StartupPhase.LAUNCHED:
            continue
        if phase < p.phase or (phase == p.phase and phase is StartupPhase.READY):
            mark = "✓"
        elif phase == p.phase:
            mark = "✗" if failed else "▶"
        else:
            mark = "·"
        words = PHASE_WORDS[phase]
        detail = _phase_detail(phase, p) if phase <= p.phase else ""
        lines.append((mark, f"{words}: {detail}" if detail else words))
    return lines


def elapsed_words(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def failure_text(f: StartupFailed) -> Text:
    """The failure's words (plain Text: log text never parsed as markup)."""
    text = Text()
    text.append("vLLM stopped: " if f.after_ready else "vLLM did not start: ", "bold")
    text.append(visible(f.reason) + "\n")
    if f.cause is not None:
        text.append("likely cause: ", "bold")
        text.append(visible(f.cause) + "\n")
        if f.hint:
            text.append("  try: " + visible(f.hint) + "\n")
        if f.seen_in:
            text.append("  seen in: " + visible(f.seen_in) + "\n")
    else:
        text.append("likely cause: not recognised (see the log lines below)\n")
    text.append(f"last {len(f.tail)} lines of {visible(f.log_path)} below")
    return text


class StartupScreen(Screen[None]):
    """Progress while the hosted server starts, with its log; the failure when it does not."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "app.quit", "quit (stops vLLM)"),
        Binding("q", "app.quit", "quit", show=False),
    ]

    DEFAULT_CSS = """
    StartupScreen > #startup-box {
        height: auto;
        padding: 0 1;
    }
    StartupScreen #startup-failure {
        color: $error;
        padding: 0 1;
        display: none;
    }
    StartupScreen.-failed #startup-failure {
        display: block;
    }
    """

    def __init__(self, host: HostWatch, *, failure: StartupFailed | None = None) -> None:
        super().__init__()
        self.host = host
        self.failure = failure
        self._cancel = threading.Event()

    def compose(self) -> ComposeResult:
        with Vertical(id="startup-box"):
            yield Static(Text(visible(self.host.title), "bold"), id="startup-title")
            yield Static("", id="startup-progress")
            yield Static("", id="startup-where")
        yield Static("", id="startup-failure")
        yield LogPane(self.host, id="startup-log")

    def on_mount(self) -> None:
        self.redraw()
        if self.failure is not None:
            self.show_failure(self.failure)
            return
        self.set_interval(1.0 / REDRAW_HZ, self.redraw)
        self.run_worker(self._wait, thread=True, name="host-ready", exit_on_error=False)

    def on_unmount(self) -> None:
        self._cancel.set()

    def _wait(self) -> None:
        failure = self.host.wait_ready(self._cancel)
        if self._cancel.is_set():
            return
        self.app.call_from_thread(self._finished, failure)

    def _finished(self, failure: StartupFailed | None) -> None:
        self.redraw()
        if failure is None:
            self.post_message(HostReady())
        else:
            self.post_message(HostFailed(failure))
            self.show_failure(failure)

    def redraw(self) -> None:
        try:
            self._redraw()
        except NoMatches:  # the app is closing (a stop signal as it starts): nothing to draw
            return

    def _redraw(self) -> None:
        p = self.host.progress()
        failed = self.failure is not None
        text = Text()
        styles = theme_styles(self.app.theme_variables)
        marks = {"✓": styles.ok, "▶": "bold", "✗": f"bold {styles.error}"}
        for mark, words in progress_lines(p, failed=failed):
            style = marks.get(mark, "dim")
            text.append(f" {mark} ", style)
            text.append(visible(words) + "\n", "" if mark != "·" else "dim")
        self.query_one("#startup-progress", Static).update(text)
        where = Text()
        if not failed:
            where.append(f"elapsed {elapsed_words(self.host.elapsed_s())}   ")
        where.append(f"server {visible(self.host.base_url)}   log {visible(self.host.log_path)}")
        where.append("   ctrl+q quits (stops vLLM)", "dim")
        self.query_one("#startup-where", Static).update(where)

    def show_failure(self, failure: StartupFailed) -> None:
        """Show why the start failed, and exactly the last log lines."""
        self.failure = failure
        self.add_class("-failed")
        self.query_one("#startup-failure", Static).update(failure_text(failure))
        self.query_one("#startup-log", LogPane).show_only(list(failure.tail))
        self.redraw()
