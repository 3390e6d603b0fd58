"""The replay screen (ui/screens/replay.py) on the sample recordings, driven with Pilot: every
key's visible effect, a click on the timeline, the RECORDED/SIMULATED header, a torn recording's
notice; the play clock is a fake one (the head moves only when the test moves it). Plus an SVG
snapshot of the screen on demo-cycle (never auto-updated) and the timeline's text."""

from __future__ import annotations

import gzip
import re

import pytest
from tests.support.ui_apps import RECORDINGS, recording_port, replay_started
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app

from specmon.core.replay_timeline import (
    PhaseSpan,
    ReplayPosition,
    ReplayTimeline,
    TimelineTick,
)
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.replay import ReplayScreen
from specmon.ui.widgets.timeline import HEAD, Timeline, column, timeline_text

SIZE = (160, 45)
X = "\N{MULTIPLICATION SIGN}"
"""The speed's sign on screen (x4 is shown with a multiplication sign)."""


def _status(app: SpecmonApp) -> str:
    """The timeline's status line (its last line)."""
    timeline = app.screen.query_one(Timeline)
    assert timeline.position is not None
    text = timeline_text(app.port.timeline, timeline.position, timeline.content_size.width)  # type: ignore[union-attr]
    return text.plain.splitlines()[-1]


def _head_column(app: SpecmonApp) -> int:
    timeline = app.screen.query_one(Timeline)
    assert timeline.position is not None
    text = timeline_text(app.port.timeline, timeline.position, timeline.content_size.width)  # type: ignore[union-attr]
    return text.plain.splitlines()[2].index(HEAD)


def _answers(screen: str) -> int:
    found = re.search(r"answers\s+(\d+)\s+failed", screen)
    assert found, screen
    return int(found.group(1))


async def test_header_says_recorded_simulated_with_the_recording_facts() -> None:
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        first = screen_text(app).splitlines()[0]
        assert first.startswith("RECORDED · SIMULATED · 2026-11-23T")
        assert "model cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit" in first
        assert "n_spec 8" in first and "http://127.0.0.1:" in first
        assert first.rstrip().endswith("SIMULATED")  # the badge, right-aligned
        assert app.screen.query_one("#replay-notice").display is False


async def test_space_pauses_and_resumes_and_the_clock_moves_the_head() -> None:
    port, clock = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        assert "▶ PLAYING" in screen_text(app)
        clock.advance(5.0)
        await wait_for_app(pilot, lambda: "0:05.0 / 1:06.6" in _status(app))
        await pilot.press("space")
        await pilot.pause()
        assert "‖ PAUSED" in screen_text(app) and "PLAYING" not in screen_text(app)
        clock.advance(30.0)
        await pilot.pause(0.3)
        assert "0:05.0 / 1:06.6" in _status(app)  # paused: the head stays
        await pilot.press("space")
        await pilot.pause()
        assert "▶ PLAYING" in screen_text(app)
        clock.advance(2.0)
        await wait_for_app(pilot, lambda: "0:07.0 / 1:06.6" in _status(app))


@pytest.mark.slow
async def test_plus_and_minus_change_the_speed_shown() -> None:
    port, clock = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        assert f"  {X}1  " in _status(app)
        await pilot.press("plus", "plus")
        await pilot.pause()
        assert f"  {X}4  " in _status(app) and f"  {X}4  " in screen_text(app)
        clock.advance(2.0)  # four recorded seconds a second
        await wait_for_app(pilot, lambda: "0:08.0 / 1:06.6" in _status(app))
        await pilot.press("minus")
        await pilot.pause()
        assert f"  {X}2  " in screen_text(app)
        for _ in range(4):
            await pilot.press("minus")
        await pilot.pause()
        assert f"  {X}0.5  " in screen_text(app)
        for _ in range(10):
            await pilot.press("plus")
        await pilot.pause()
        assert f"  {X}64  " in screen_text(app)


@pytest.mark.slow
async def test_seeking_moves_the_play_head_and_the_numbers() -> None:
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("space")  # paused: only the keys move the head
        await pilot.pause()
        start_col = _head_column(app)
        assert _answers(screen_text(app)) == 0
        await pilot.press("right", "right")
        await pilot.pause()
        assert "0:20.0 / 1:06.6" in _status(app)
        at_20 = _answers(screen_text(app))
        assert at_20 > 0 and _head_column(app) > start_col
        await pilot.press("shift+right")
        await pilot.pause()
        assert "1:06.6 / 1:06.6" in _status(app) and _answers(screen_text(app)) == 30
        await pilot.press("left")
        await pilot.pause()
        assert "0:56.6 / 1:06.6" in _status(app)
        assert 0 < _answers(screen_text(app)) < 30  # rebuilt from the start
        await pilot.press("shift+left")
        await pilot.pause()
        assert "0:00.0 / 1:06.6" in _status(app) and _head_column(app) == start_col
        assert _answers(screen_text(app)) == 0


async def test_home_and_end() -> None:
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("end")
        await pilot.pause()
        screen = screen_text(app)
        assert "■ END" in screen and _answers(screen) == 30
        assert "cycle: every 10 requests, 3 degraded" in screen
        assert screen.count("vanilla-speed") >= 9  # nine table rows, and the panel's count
        await pilot.press("home")
        await pilot.pause()
        assert "0:00.0 / 1:06.6" in _status(app) and _answers(screen_text(app)) == 0


async def test_n_jumps_to_the_flagged_request_and_N_back() -> None:
    port, _ = recording_port()
    flags = list(port.timeline.flags)
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("space")
        await pilot.press("n")  # the server's status marker at the start
        await pilot.press("n")  # the first flagged request: r6, a transition
        await pilot.pause()
        position = port.position()
        assert position.t == flags[0]
        screen = screen_text(app)
        assert "transition: r6" in screen  # the panel's note names it with its verdict
        rows = [line for line in screen.splitlines() if re.match(r"^ ?\d+:\d\d\.\d\s+r\d+", line)]
        assert "r6" in rows[-1]  # the last answer is the flag (waiting for the slow level yet)
        await pilot.press("n")
        await pilot.pause()
        assert port.position().t == flags[1] and "vanilla speed: r7" in screen_text(app)
        await pilot.press("N")
        await pilot.pause()
        assert port.position().t == flags[0]


async def test_a_click_on_the_timeline_seeks_there() -> None:
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("space")
        timeline = app.screen.query_one(Timeline)
        width = timeline.content_size.width
        x = width // 2
        # the widget has one column of padding on the left
        await pilot.click(Timeline, offset=(x + 1, 1))
        await pilot.pause()
        t = port.position().t
        tl = port.timeline
        assert column(t, tl.start, tl.end, width) == x
        assert abs(t - (tl.end - tl.start) / 2) < tl.end / width
        assert _head_column(app) == x


async def test_a_torn_recording_replays_to_the_tear_with_a_notice_on_screen(tmp_path) -> None:
    raw = gzip.decompress((RECORDINGS / "healthy.ndjson.gz").read_bytes())
    cut = raw.index(b"\n", len(raw) // 2) + 20
    torn_line = raw[:cut].count(b"\n") + 1
    torn = tmp_path / "torn.ndjson"
    torn.write_bytes(raw[:cut])
    port, _ = recording_port(torn)
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("end")
        await pilot.pause()
        screen = screen_text(app)
        assert f"torn.ndjson: line {torn_line}: torn last line" in screen
        assert 0 < _answers(screen) < 12


async def test_many_bad_lines_are_one_short_notice_that_esc_clears(tmp_path) -> None:
    lines = gzip.decompress((RECORDINGS / "healthy.ndjson.gz").read_bytes()).split(b"\n")
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\n".join([lines[0], *[b"[1.0, broken"] * 859, *lines[1:]]))
    port, _ = recording_port(bad)
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        notice = app.screen.query_one("#replay-notice")
        assert notice.display is True
        assert notice.region.height <= 3  # the panel and the answers keep the screen
        screen = screen_text(app)
        assert "859 bad lines skipped (lines 2, 3, 4, 5, 6, …; line 2: " in screen
        await pilot.press("escape")
        await pilot.pause()
        assert notice.display is False
        assert "bad lines skipped" not in screen_text(app)
        assert app.is_running


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bad_t", ["1e308", "NaN", "Infinity"])
async def test_q_quits_after_end_on_a_recording_with_an_impossible_time(tmp_path, bad_t) -> None:
    lines = gzip.decompress((RECORDINGS / "healthy.ndjson.gz").read_bytes()).split(b"\n")
    at = len(lines) // 2
    lines[at] = b"[" + bad_t.encode() + b', "m", {"label": "bad"}]'
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\n".join(lines))
    port, _ = recording_port(bad)
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        assert f"bad.ndjson: line {at + 1}: event time" in screen_text(app)
        await pilot.press("end")
        await pilot.pause()
        assert "END" in _status(app)
        await pilot.press("q")
        await wait_for_app(pilot, lambda: not app.is_running)
    assert app.return_code == 0


def test_timeline_text_draws_ticks_phases_head_and_status() -> None:
    timeline = ReplayTimeline(
        start=0.0,
        end=100.0,
        flags=(50.0,),
        marks=(
            TimelineTick(0.0, "status", "up"),
            TimelineTick(50.0, "marker", "here"),
            TimelineTick(100.0, "reset", "counters reset"),
        ),
        phases=(PhaseSpan(0.0, 40.0, "fast"), PhaseSpan(40.0, 60.0, "degraded")),
        cycle_period=10,
        counts={"status": 1, "flag": 1, "marker": 1, "reset": 1},
        jumps=(0.0, 50.0, 100.0),
    )
    position = ReplayPosition(
        t=25.0,
        start=0.0,
        end=100.0,
        playing=False,
        speed=4.0,
        at_end=False,
        events_applied=1,
        events_total=2,
    )
    ticks, band, head, status = timeline_text(timeline, position, 11).plain.splitlines()
    assert ticks == "·    ▼    ↺"  # the flag wins its column over the marker
    assert band == "━" * 7 + "─" * 4
    assert head == "   ▲       "
    assert status.startswith(f"‖ PAUSED  {X}4  0:25.0 / 1:40.0  ▼ 1 flagged  ↺ 1 reset")
    assert "◆ 1 marker" in status and "cycle every 10 requests" in status
    styled = timeline_text(timeline, position, 11)
    band_at = len(ticks) + 1  # the band's first character in the whole text

    def style_at(col: int) -> str:
        i = band_at + col
        return " ".join(str(s.style) for s in styled.spans if s.start <= i < s.end)

    assert [style_at(c) for c in (0, 3, 4, 6, 7)] == ["green", "green", "red", "red", "dim"]


def test_snapshot_replay_screen_on_the_cycle_sample(snap_compare) -> None:
    port, _ = recording_port()

    async def at_the_third_degraded_request(pilot) -> None:
        await replay_started(pilot)
        await pilot.press("space")
        for _ in range(5):  # the status marker, then four flags (r6, a transition, then three
            # degraded)
            await pilot.press("n")
        await pilot.pause(0.3)

    assert snap_compare(
        SpecmonApp(port, mode="replay"),
        terminal_size=SIZE,
        run_before=at_the_third_degraded_request,
    )


@pytest.mark.parametrize("simulated", [True, False])
async def test_the_simulated_badge_follows_the_header(tmp_path, simulated: bool) -> None:
    raw = gzip.decompress((RECORDINGS / "healthy.ndjson.gz").read_bytes())
    if not simulated:
        raw = raw.replace(b'"simulated":true', b'"simulated":false', 1)
    path = tmp_path / "h.ndjson"
    path.write_bytes(raw)
    port, _ = recording_port(path)
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        first = screen_text(app).splitlines()[0]
        assert first.startswith("RECORDED · SIMULATED · " if simulated else "RECORDED · 2026-")
        assert app.screen.query_one("#replay-badge").display is simulated


async def test_a_rows_badge_waits_for_the_levels_then_stays() -> None:
    """An answer that ends before the speed levels exist waits for them and is classed once
    they do; from then on its badge never changes (the replay re-classed every row against the
    levels at the play head, so r6 said vanilla-speed just after it ended and transition at the
    end of the recording, while the timeline kept vanilla-speed: three counts disagreed)."""
    port, _ = recording_port()
    app = SpecmonApp(port, mode="replay")
    async with app.run_test(size=SIZE) as pilot:
        await replay_started(pilot)
        await pilot.press("space")
        port.seek(port.timeline.end)
        ends = {r.request_id: r.t_end for r in port.view().rows}

        def badge(rid: str) -> str:
            screen = app.screen
            assert isinstance(screen, ReplayScreen)
            screen.refresh_all()
            rows = screen._rows_shown or ()
            return next(r[-1] for r in rows if r[1] == rid)

        assert badge("r6") == "transition"
        port.seek(ends["r6"] + 0.01)
        assert badge("r6") == "ok"  # one slow answer is no level yet
        port.seek(ends["r10"] + 0.01)  # three slow answers, at two answers' ends: levels
        assert badge("r6") == "transition"
        port.seek(ends["r20"] + 0.01)
        assert badge("r6") == "transition" and badge("r16") == "transition"
