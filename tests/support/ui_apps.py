"""Ready-made apps of the Textual tests and their first Pilot steps, shared by the screen tests,
the snapshots and the layout tests: the chat with one answer and the panel's graphs, `watch` on
fixed multi-server views, the replay of the demo-cycle recording on a fake clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from tests.support.watch_views import watch_view
from textual.widgets import Input

from specmon.core.clock import FakeClock
from specmon.core.views import SessionView
from specmon.sources.recording_player import read_recording
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.replay_app import recorded_label, replay_port
from specmon.ui.replay_port import ReplayPort
from specmon.ui.screens.replay import ReplayScreen
from specmon.ui.widgets.timeline import Timeline
from specmon.ui.widgets.turn import AnswerView

RunBefore = Callable[[object], Awaitable[None]]
"""A snapshot's `run_before`: Pilot steps before the picture is taken."""

# ---------------------------------------------------------------- the chat

ANSWER = [
    "Speculative decoding lets a small **draft** model propose",
    " tokens that the target model verifies in one step.\n\n",
    "- accepted tokens cost one target step\n- rejected ones cost a little extra\n\n",
    "```python\ndef al(accepted, drafts):\n",
    "    return 1 + accepted / drafts\n```\n\nThat is all.",
]
"""The fake answer of the chat snapshots (markdown: bold, a list, a code block)."""


def still(pilot) -> None:
    """No blinking cursor: a blink is not a change, and it made snapshots differ now and then."""
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False


async def chat_one_answer(pilot) -> None:
    """Connected, "what is it?" asked at the prompt, the answer finished, the cursor still."""
    app = pilot.app
    await wait_for_app(pilot, lambda: app.port.connected)
    await pilot.pause()  # the breakpoint classes' layout settled: the click lands on the prompt
    await pilot.click("#prompt")
    for key in "what is it?":
        await pilot.press(key if key != " " else "space")
    await pilot.press("enter")
    await wait_for_app(pilot, lambda: any(a.finished for a in app.screen.query(AnswerView)))
    still(pilot)
    await pilot.pause(0.2)


def chat_app_with_view(view: SessionView | None, answers=None, **kwargs) -> SpecmonApp:
    """The chat on a FakePort whose session view is `view` (the panel's numbers and graphs)."""
    port = FakePort(answers=answers or [ANSWER])
    port.fake_view = view
    return SpecmonApp(port, settings=ChatSettings(max_tokens=256), **kwargs)


async def chat_with_graphs(pilot) -> None:
    """One answer, then the panel drawn (its graphs: the view's server history)."""
    await chat_one_answer(pilot)
    pilot.app.screen.refresh_panel()
    await pilot.pause(0.3)


# ---------------------------------------------------------------- watch

WATCH_SIZE = (160, 50)


class WatchPort(FakePort):
    """A fake port that records the servers added and removed."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list[str] = []
        self.removed: list[str] = []

    def add_target(self, url: str) -> str:
        self.added.append(url)
        return url

    def remove_target(self, url: str) -> str:
        self.removed.append(url)
        view = self.fake_view
        if view is not None:
            self.fake_view = replace(
                view, servers=tuple(s for s in view.servers if s.source != url)
            )
        return url


def watch_app(view: SessionView | None = None) -> tuple[SpecmonApp, WatchPort]:
    """`specmon watch` on a WatchPort showing `view` (default: watch_views.watch_view())."""
    port = WatchPort()
    port.fake_view = view if view is not None else watch_view()
    return SpecmonApp(port, mode="watch"), port


async def watch_ready(pilot) -> None:
    """The watch screen connected and its first server's row shown."""
    await wait_for_app(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
    await wait_for_app(pilot, lambda: "127.0.0.1:8000" in screen_text(pilot.app))


def watch_settled(*presses: str) -> RunBefore:
    """A snapshot's run_before: connected, `presses` pressed, the panel drawn."""

    async def run(pilot) -> None:
        await wait_for_app(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
        for key in presses:
            await pilot.press(key)
        pilot.app.screen.refresh_panel()
        await pilot.pause(0.3)

    return run


# ---------------------------------------------------------------- replay

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
CYCLE = RECORDINGS / "demo-cycle.ndjson.gz"


def recording_port(
    path: Path = CYCLE, clock: FakeClock | None = None
) -> tuple[ReplayPort, FakeClock]:
    """The replay port of `path` on a fake clock (the play head moves only when it does)."""
    clock = clock or FakeClock(1000.0)
    recording = read_recording(path)
    label = recorded_label(recording.info, recording.started_at)
    port = replay_port(str(path), baseline_tok_s=None, speed=1.0, label=label, clock=clock)
    return port, clock


async def replay_started(pilot) -> None:
    """The replay screen shown with its timeline's position."""
    await wait_for_app(pilot, lambda: isinstance(pilot.app.screen, ReplayScreen))
    await wait_for_app(pilot, lambda: pilot.app.screen.query_one(Timeline).position is not None)
