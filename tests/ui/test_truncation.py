"""Cut text ends in "…" (one rule, `core.display_text.shorten`, the same as Rich's and
Textual's ellipsis), and a footer leaves out whole keys, never help (f1) and quit (^q): the
rule itself, the GPU name, the footers of chat, demo, watch and replay at 80x24 and 160x45, the
dialogs' titles, the panel's saved line and `watch --once`'s lines."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console
from tests.support.fake_views import NO_CONTEXT, NO_QUALITY, NO_SAVING, QUIET_THERMAL, session_view
from tests.support.ui_apps import (
    chat_app_with_view,
    chat_one_answer,
    recording_port,
    replay_started,
    watch_app,
    watch_ready,
)
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from tests.support.watch_views import watch_view
from textual.screen import ModalScreen
from textual.widgets import Footer, Label
from textual.widgets._footer import FooterKey, FooterLabel

from specmon.core import display_text
from specmon.core.clock import FakeClock
from specmon.core.diagnosis.seconds_saved import AnswerSaving
from specmon.core.diagnosis.state import DiagnosisView
from specmon.core.events import GpuReading
from specmon.core.views import GpuView
from specmon.ui.app import SpecmonApp
from specmon.ui.live_console import once_text
from specmon.ui.servers_text import short_name
from specmon.ui.widgets.side_panel import gpu_section

SMALL = (80, 24)
LARGE = (160, 45)
RTX = "simulated NVIDIA GeForce RTX 5090 Laptop GPU"

# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        ("NVIDIA H100", 20, "NVIDIA H100"),  # fits: whole
        ("NVIDIA H100", 11, "NVIDIA H100"),
        ("simulated NVIDIA GeForce RTX 5090", 30, "simulated NVIDIA GeForce RTX …"),
        ("abc", 1, "…"),
        ("abc", 0, ""),
        ("模型名字很长", 7, "模型名…"),  # two cells a character: 6 cells and the …
        ("模型名字很长", 6, "模型…"),  # never one cell too many (a wide one is not split)
    ],
)
def test_shorten_cuts_in_cells_and_ends_in_an_ellipsis(text: str, width: int, shown: str):
    out = display_text.shorten(text, width)
    assert out == shown
    assert display_text.cell_width(out) <= width


def test_shorten_keeps_a_port_after_the_ellipsis():
    assert display_text.shorten("gpu-box-with-a-long-name.example:8001", 20, keep_end=":8001") == (
        "gpu-box-with-a…:8001"
    )
    assert short_name("http://gpu-box-with-a-long-name.example:8001", 20).endswith("…:8001")
    # no room for a host character: the plain cut
    assert display_text.shorten("ab:80001234", 5, keep_end=":80001234") == "ab:8…"


def _gpu(name: str) -> GpuReading:
    return GpuReading(
        index=0,
        name=name,
        temperature_c=60.0,
        slowdown_temperature_c=85.0,
        power_w=100.0,
        power_limit_w=450.0,
        memory_used_bytes=None,
        memory_total_bytes=None,
        sm_clock_mhz=1900.0,
        memory_clock_mhz=None,
        utilization_pct=50.0,
        clock_event_reasons=(),
    )


def _gpu_line(name: str) -> str:
    gpu = GpuView(source="dcgm", t=1.0, error=None, gpus=(_gpu(name),), history=())
    view = replace(session_view(prefix="g"), gpu=gpu)
    return gpu_section(view).plain.splitlines()[0]


def test_the_gpu_name_is_whole_or_ends_in_an_ellipsis():
    # It was cut to 30 characters with nothing said: "simulated NVIDIA GeForce RTX 5".
    assert _gpu_line(RTX) == f"GPU 0 {RTX}"
    long_name = RTX + " with a very long vendor suffix"
    line = _gpu_line(long_name)
    assert line.endswith("…") and line[6:-1] in long_name


# ---------------------------------------------------------------- footers


def _footer_line(app) -> str:
    return screen_text(app).splitlines()[-1]


def _check_footer(app, size: tuple[int, int]) -> None:
    """f1 and ^q shown; every key shown whole; the keys left out are the last ones (lowest
    priority), and then the row ends in "…"; at 160 columns nothing is left out."""
    footer = app.screen.query_one(Footer)
    line = _footer_line(app)
    assert "f1 help" in line and "^q quit" in line, line
    keys = [k for k in footer.query_children(FooterKey) if not k.has_class("-command-palette")]
    shown = [k for k in keys if k.display]
    for key in shown:
        assert f"{key.key_display} {key.description}" in line, (key.description, line)
        assert footer.region.contains_region(key.region), key.description
    left_out = [k for k in keys if not k.display]
    more = footer.query_children(FooterLabel).filter(".-more")
    assert any(m.display for m in more) == bool(left_out)
    if left_out:
        assert line.split("▏")[0].rstrip().endswith("…"), line
        first_out = keys.index(left_out[0])
        assert all(not k.display for k in keys[first_out:])  # lower priority than one out: out
    if size == LARGE:
        assert not left_out, [k.description for k in left_out]


@pytest.mark.slow
@pytest.mark.parametrize("size", [SMALL, LARGE])
async def test_chat_and_demo_footers_keep_help_and_quit_and_whole_keys(size):
    app = chat_app_with_view(session_view(prefix="r"))
    async with app.run_test(size=size) as pilot:
        await chat_one_answer(pilot)
        _check_footer(app, size)
    port = FakePort(answers=[["an answer"]])
    app = SpecmonApp(port, mode="demo", auto_prompts=("first demo",), clock=FakeClock())
    async with app.run_test(size=size) as pilot:
        await wait_for_app(pilot, lambda: port.connected)
        await pilot.pause()
        _check_footer(app, size)


@pytest.mark.slow
@pytest.mark.parametrize("size", [SMALL, LARGE])
async def test_watch_footer_keeps_help_and_quit_and_whole_keys(size):
    app, _ = watch_app()
    async with app.run_test(size=size) as pilot:
        await watch_ready(pilot)
        await pilot.pause()
        _check_footer(app, size)


@pytest.mark.slow
@pytest.mark.parametrize("size", [SMALL, LARGE])
async def test_replay_footer_keeps_help_and_quit_and_whole_keys(size):
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=size) as pilot:
        await replay_started(pilot)
        await pilot.pause()
        _check_footer(app, size)


# ---------------------------------------------------------------- dialogs and the panel


def _labels_inside(app) -> None:
    """Every label of the dialog lies inside its box: none is cut at the box's edge."""
    assert isinstance(app.screen, ModalScreen)
    labels = [label for label in app.screen.query(Label) if label.display and label.region]
    assert labels, type(app.screen).__name__
    for label in labels:
        box = label.parent
        assert box is not None
        assert box.content_region.contains_region(label.region), str(label.render())


async def _each_dialog_checked(pilot, keys: tuple[str, ...]) -> None:
    """Each key opens its dialog, whose labels are checked once it is laid out (its labels
    placed: what a dialog shows is set by the end of its mount, its refresh timers tick once a
    second at the soonest), and Esc closes it before the next key."""
    app = pilot.app

    def laid_out() -> bool:
        screen = app.screen
        return isinstance(screen, ModalScreen) and any(lb.region for lb in screen.query(Label))

    for key in keys:
        await pilot.press(key)
        await wait_for_app(pilot, laid_out, f"the dialog of {key} laid out")
        _labels_inside(app)
        await pilot.press("escape")
        await wait_for_app(
            pilot, lambda: not isinstance(app.screen, ModalScreen), f"the dialog of {key} closed"
        )


@pytest.mark.slow
async def test_watch_dialogs_titles_are_not_cut_at_80_columns():
    app, _ = watch_app()
    async with app.run_test(size=SMALL) as pilot:
        await watch_ready(pilot)
        await _each_dialog_checked(pilot, ("a", "m"))


@pytest.mark.slow
async def test_chat_dialogs_titles_are_not_cut_at_80_columns():
    app = chat_app_with_view(session_view(prefix="r"))
    async with app.run_test(size=SMALL) as pilot:
        await chat_one_answer(pilot)
        await _each_dialog_checked(pilot, ("f2", "f6", "f4", "f1", "f8", "ctrl+o"))


@pytest.mark.slow
async def test_the_panels_saved_line_ends_in_an_ellipsis_at_160_columns():
    saving = AnswerSaving("x", 1.0, 200, 5.0, 4.2, -0.8, True, "AL 1.1 did not pay for the drafts")
    saved = replace(
        NO_SAVING, baseline_tok_s=60.0, answers=9, answers_cost=3, saved_s=15.4, recent=(saving,)
    )
    diagnosis = DiagnosisView(NO_CONTEXT, QUIET_THERMAL, saved, NO_QUALITY)
    app = chat_app_with_view(replace(session_view(prefix="r"), diagnosis=diagnosis))
    async with app.run_test(size=LARGE) as pilot:
        await chat_one_answer(pilot)
        app.screen.refresh_panel()
        await wait_for_app(pilot, lambda: "saved +15.4 s" in screen_text(app))
        line = next(ln for ln in screen_text(app).splitlines() if "saved +15.4 s" in ln)
        panel_part = line.split("▏")[-1].rstrip(" ▁▂▃▄▅▆▇█")
        assert panel_part.endswith("…") or panel_part.endswith("tok/s)"), panel_part


# ---------------------------------------------------------------- watch --once


def test_watch_once_keeps_each_server_on_one_line_at_80_columns():
    view = watch_view()
    long_model = "an-organisation/a-very-long-model-name-that-does-not-fit-AWQ-4bit-instruct"
    view = replace(view, servers=tuple(replace(s, model=long_model) for s in view.servers))
    console = Console(width=80, record=True, color_system=None)
    console.print(once_text(view, title="specmon watch", width=80))
    lines = console.export_text().splitlines()
    serving = lines.index("serving")
    rows = lines[serving + 1 : serving + 1 + len(view.servers)]
    assert all(long_model[:20] in row for row in rows), rows  # one line a server, none wrapped
    for row in rows:
        assert row.rstrip().endswith("…") and display_text.cell_width(row) <= 80, row
