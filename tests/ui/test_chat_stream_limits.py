"""The chat screen with misbehaving streams (a fake port, no server): a quiet stream says how
long it has been quiet and when it gives up (the session clock is the test's); a cancelled or
failed answer keeps only its shown text, not what the stream grew."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from tests.support.hostile_stream import ROLE, HostileServer, content, event, send
from tests.support.retained import feed_retained
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from tests.ui.chat_pilot import SIZE
from tests.ui.chat_pilot import answers as _answers
from tests.ui.chat_pilot import ask as _ask
from tests.ui.chat_pilot import connected as _connected

from specmon.core.events import RequestEnded
from specmon.core.stream_limits import StreamLimits
from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.ui.app import SpecmonApp
from specmon.ui.live_port import LivePort
from specmon.ui.port import Ask


@pytest.mark.slow
async def test_a_quiet_stream_shows_how_long_and_when_it_gives_up():
    port = FakePort(hold=True)
    port.idle_timeout_s = 60.0
    clock = [0.0]
    port.now = lambda: clock[0]  # type: ignore[method-assign]
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "q")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        port.feeds[0].play(["Some text"])  # the last arrival at t = 0.1 s
        clock[0] = 0.5
        await wait_for_app(pilot, lambda: "Some text" in screen_text(app))
        await pilot.pause(0.5)
        assert "no data for" not in screen_text(app)
        clock[0] = 12.6
        await wait_for_app(pilot, lambda: "no data for 12 s — gives up at 60 s" in screen_text(app))
        port.feeds[0].t = 12.7
        port.feeds[0].play([" and more"])  # data again: the note goes
        clock[0] = 12.8
        await wait_for_app(pilot, lambda: "no data for" not in screen_text(app))


FRAMES = 4
"""Frames kept per allocation: enough to tell the session's fold from the feed's code (a call
from the fold into an included file would be the frame below it, or a few more). Each frame
costs every allocation the app makes while traced: at 25, Textual drawing and closing the
answer took 8 s instead of 2."""


def _held_by_the_feed(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes still allocated by the feed's code and the test's chunk maker (the stream's
    growth; the answer's widgets and the screen's text are other files, and what the session's
    fold keeps of the request, its row, is the session's: tests/unit/test_session_state.py)."""
    files = (
        tracemalloc.Filter(True, "*/ui/live_port.py"),
        tracemalloc.Filter(True, "*/ui/answer_feed.py"),
        tracemalloc.Filter(True, "*/tests/support/ui_fakes.py"),
        tracemalloc.Filter(False, "*/core/session_state.py", all_frames=True),
    )
    return sum(s.size for s in snapshot.filter_traces(files).statistics("filename"))


@pytest.mark.slow
async def test_escape_frees_what_the_stream_grew_and_keeps_the_shown_text():
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "long")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        feed = port.feeds[0]
        tracemalloc.start(FRAMES)
        try:
            feed.play(["word "] * 3000)
            await wait_for_app(pilot, lambda: "word word" in screen_text(app))
            assert len(feed.chunks()) == 3000
            grown_snapshot = tracemalloc.take_snapshot()
            await pilot.press("escape")
            await wait_for_app(pilot, lambda: _answers(app)[0].finished)
            await pilot.pause()
            kept_snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        # Filtered once the tracer is off: a snapshot is a copy, and filtering ~35,000 traces
        # while each allocation of the filter itself was traced took 22 s.
        grown = _held_by_the_feed(grown_snapshot)
        kept = _held_by_the_feed(kept_snapshot)
        shown = "word " * 3000  # drained by the feed: the text the answer shows
        assert grown > 20 * len(shown)  # 3000 chunks and their fragments
        assert kept < len(shown) + 4096, (grown, kept)  # the shown text, and nothing per chunk
        # Nothing per chunk is left in the feed: chunks, fragments, arrival times.
        assert feed.chunks() == ()
        assert feed_retained(feed) == 0
        text = screen_text(app)
        assert "cancelled — partial answer kept" in text
        assert "11997 tokens" in text  # the numbers stay (1 + 4 x 2999 tokens)
        assert app.screen.conversation.turns[0].answer == "word " * 3000


async def test_a_failed_answer_frees_its_stream_too():
    port = FakePort(hold=True)
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await _ask(pilot, "q")
        await wait_for_app(pilot, lambda: bool(port.feeds))
        feed = port.feeds[0]
        feed.play(["x"] * 500)
        reason = "chunk 12: `choices[0]` is a string, expected an object [b]x[/b]"
        feed.end("failed", reason)
        await wait_for_app(pilot, lambda: _answers(app)[0].finished)
        await pilot.pause()
        assert feed.chunks() == () and feed_retained(feed) == 0
        assert "failed — " + reason in screen_text(app)  # literally: no markup read


# ---------------------------------------------------------------- through a collector process


def _port_on(server: HostileServer, limits: StreamLimits) -> LivePort:
    def make() -> CollectorProcess:
        config = SessionConfig((Target(server.url),), stream_limits=limits)
        return CollectorProcess(config, state_factory(None))

    return LivePort(make, idle_timeout_s=limits.idle_timeout_s)


def _ended(feed) -> RequestEnded:
    for _ in range(1200):  # a failure bound (60 s), not a speed target
        drained = feed.drain()
        if drained.ended is not None:
            return drained.ended
        time.sleep(0.05)
    raise AssertionError("the answer never ended")


@pytest.mark.slow
def test_the_collector_reads_under_the_limits_the_command_gave():
    """`chat`'s path: the limits travel in the SessionConfig to the collector process; an endless
    line and a stall each end the answer with their reason, and the session stops at once."""

    async def endless_line(reader, writer) -> None:
        await send(writer, event(ROLE) + event(content("kept", 1)) + b"data: ")
        while True:
            await send(writer, b"z" * 65536)

    async def stall(reader, writer) -> None:
        await send(writer, event(ROLE) + event(content("kept", 1)))
        await reader.read()

    for body, reason in (
        (endless_line, "stream line over 1 MiB"),
        (stall, "no data from the server for 0.5 s"),
    ):
        server = HostileServer(body)
        port = _port_on(server, StreamLimits(idle_timeout_s=0.5))
        try:
            assert port.connect().server is not None
            feed = port.ask(Ask("hi"))
            ended = _ended(feed)
            assert (ended.outcome, ended.error) == ("failed", reason)
            assert port.numbers(feed).tokens == 1
        finally:
            port.close()
            server.stop()
