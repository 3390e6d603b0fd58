"""A session without the app (`watch --once`'s text, the plain lines): untrusted text is shown
literally, missing numbers are —, GPU readings and throttling are on screen."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from specmon.core.events import (
    GpuReading,
    GpuSampled,
    RequestEnded,
    RequestStarted,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.ui.live_console import once_text

HOSTILE = "\x1b[2J\x1b]0;pwned\x07[bold red]not markup[/] \u202eevil\u202c tail"


def _screen(view: SessionView) -> str:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system="truecolor")
    console.print(once_text(view, title="[blink]title[/]", width=160))
    return out.getvalue()


def _state_with_hostile_text() -> SessionState:
    state = SessionState(SessionInfo(server="http://127.0.0.1:8000", simulated=True))
    state.apply(RequestStarted(t=0.0, request_id="r1", source="http://127.0.0.1:8000", model="m"))
    state.apply(StreamChunk(t=0.1, request_id="r1", role="assistant", completion_tokens=0))
    state.apply(StreamChunk(t=0.2, request_id="r1", text=HOSTILE, completion_tokens=1))
    state.apply(
        RequestEnded(t=0.3, request_id="r1", outcome="failed", error=HOSTILE, completion_tokens=1)
    )
    state.apply(
        ServerStatusChanged(t=0.4, source="http://127.0.0.1:8000", status="down", detail=HOSTILE)
    )
    return state


def test_untrusted_text_is_shown_literally_never_interpreted() -> None:
    state = _state_with_hostile_text()
    screen = _screen(state.view())
    # The words arrive on screen as text, markup brackets included ...
    assert "[bold red]not markup[/]" in screen
    assert "[blink]title[/]" in screen
    # ... while the escape sequences and the bidi override in that text never reach the terminal.
    assert "\x1b[2J" not in screen
    assert "\x1b]0;pwned" not in screen
    assert "\u202e" not in screen
    assert "SIMULATED" in screen


def test_missing_numbers_are_dashes_and_zero_stays_zero() -> None:
    state = SessionState(SessionInfo(server="http://127.0.0.1:8000"))
    gpu = GpuReading(index=0, name="NVIDIA H200", temperature_c=0.0, power_w=None)
    state.apply(GpuSampled(t=1.0, source="gpu", gpus=(gpu,)))
    line = next(x for x in _plain(state.view()).splitlines() if "GPU 0" in x)
    assert "0 °C" in line  # a real zero reading stays 0
    assert "—/— W" in line  # power and limit unknown: dashes, not 0
    assert "VRAM —/— GiB" in line


def test_gpu_line_shows_vram_power_clocks_and_throttling() -> None:
    state = SessionState(SessionInfo(server="http://127.0.0.1:8000"))
    gpu = GpuReading(
        index=0,
        name="NVIDIA H200",
        temperature_c=91.0,
        slowdown_temperature_c=90.0,
        memory_used_bytes=8 * 1024**3,
        memory_total_bytes=140 * 1024**3,
        utilization_pct=99.0,
        power_w=693.0,
        power_limit_w=700.0,
        sm_clock_mhz=1410.0,
        memory_clock_mhz=2619.0,
        clock_event_reasons=("sw_power_cap", "hw_thermal_slowdown"),
    )
    state.apply(GpuSampled(t=1.0, source="gpu", gpus=(gpu,)))
    line = next(x for x in _plain(state.view()).splitlines() if "GPU 0" in x)
    for part in ("91 °C (slowdown 90)", "693/700 W", "VRAM 8.0/140.0 GiB", "SM 1410 MHz"):
        assert part in line
    assert "clocks held by: sw_power_cap, hw_thermal_slowdown" in line


def test_no_gpu_says_why() -> None:
    state = SessionState(SessionInfo(server="http://127.0.0.1:8000"))
    state.apply(GpuSampled(t=1.0, source="gpu", gpus=(), error="no GPU: NVML library not found"))
    assert "no GPU: NVML library not found" in _plain(state.view())


def _plain(view: SessionView) -> str:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False, color_system=None).print(
        once_text(view, title="t", width=200)
    )
    return out.getvalue()


def test_a_server_cannot_forge_lines_in_plain_output() -> None:
    from specmon.ui.live_console import clean, run_plain

    forged = "refused\n[SIMULATED] r99: 999 tokens, decode 9999.0 tok/s, ok"
    state = SessionState(SessionInfo(server="http://127.0.0.1:8000"))
    state.apply(
        ServerStatusChanged(t=0.0, source="http://127.0.0.1:8000", status="down", detail=forged)
    )
    lines: list[str] = []
    done = threading.Event()
    done.set()
    run_plain(state.view, done=done, write=lines.append)
    assert len(lines) == 1 and "r99" in lines[0]  # shown, but inside the server's own line
    assert "\n" not in lines[0]
    assert clean("a\nb", multiline=True) == "a\nb"  # the answer panel keeps its paragraphs


def test_plain_lines_say_a_verdict_again_when_it_changes() -> None:
    # r6 (the seed's 103 tok/s) ends before the speed levels exist: its line says ok; once the
    # levels appear it is classed a transition, and a line says so (the panel counts it).
    from tests.support.session_feed import request_events

    from specmon.ui.live_console import run_plain

    state = SessionState(SessionInfo(server="http://127.0.0.1:8000", n_spec=4))
    views = []
    for i, speed in enumerate((221.0, 214.0, 218.0, 222.0, 230.0, 103.0, 59.0, 62.0, 62.0, 212.0)):
        for e in request_events(
            f"r{i + 1}", i * 10.0, tokens_per_step=4, steps=50, step_s=4 / speed
        ):
            state.apply(e)
        views.append(state.view())
    lines: list[str] = []
    done = threading.Event()

    def first() -> SessionView:
        done.set()
        return views[5]  # r1..r6

    run_plain(first, done=done, write=lines.append, interval=0.001, final_view=lambda: views[-1])
    r6 = [line for line in lines if line.startswith("r6")]
    assert len(r6) == 2 and r6[0].endswith(", ok")
    assert r6[1].startswith("r6 judged again:") and "TRANSITION" in r6[1]


class _TerminalOut(io.StringIO):
    """Standard output that says it is a terminal (standard input, under pytest, is not)."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_on_stdout_alone_gets_the_plain_lines(monkeypatch) -> None:
    """stdout a terminal, stdin not (`specmon demo < /dev/null`): no app, and no redrawn Rich
    view either (it was removed: docs/app.md, "Without a terminal"); the plain lines."""
    from specmon.ui.app_runner import show_console

    state = SessionState(SessionInfo(server="http://127.0.0.1:8000"))
    state.apply(ServerStatusChanged(t=0.0, source="http://127.0.0.1:8000", status="up"))

    class Monitor:
        def view(self, fresh: bool = False) -> SessionView:
            return state.view()

    out = _TerminalOut()
    monkeypatch.setattr("sys.stdout", out)
    done = threading.Event()
    done.set()
    show_console(Monitor(), done=done, banner="[SIMULATED] specmon demo against x")  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "[SIMULATED] specmon demo against x",
        "server http://127.0.0.1:8000: up",
    ]
