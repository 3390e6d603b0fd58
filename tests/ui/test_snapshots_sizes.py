"""SVG snapshots of the chat, `specmon watch` (two servers) and the replay at the three terminal
sizes people use: 80x24 (the default), 100x30 and 160x45 (docs/app.md, "Screen": at 80x24 the key
numbers vanished). Fixed views and a fake clock, so every picture is the same each run; committed
under tests/ui/__snapshots__ and never updated by CI (`--snapshot-update` is for a person who has
looked at the new picture)."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.fake_views import SEED_SPEEDS, session_view
from tests.support.ui_apps import (
    chat_app_with_view,
    chat_with_graphs,
    recording_port,
    replay_started,
    watch_app,
    watch_settled,
)
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from tests.support.watch_views import watch_view

from specmon.ui.app import SpecmonApp

SIZES = [(80, 24), (100, 30), (160, 45)]
IDS = ["80x24", "100x30", "160x45"]


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_chat_at_size(snap_compare, size: tuple[int, int]) -> None:
    """One answer, a detected cycle and a trim hint: at 80x24 the panel is one summary line
    (F9 opens it), at 100x30 it is under the chat, at 160x45 beside it."""
    app = chat_app_with_view(session_view(prefix="r", speeds=SEED_SPEEDS * 4))
    assert snap_compare(app, terminal_size=size, run_before=chat_with_graphs)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_watch_two_servers_at_size(snap_compare, size: tuple[int, int]) -> None:
    """Two servers: no row wraps (narrower names, then fewer columns), the sections sit one,
    two or three a row."""
    view = watch_view(down=False)
    view = dataclasses.replace(view, servers=view.servers[:2])
    assert snap_compare(watch_app(view)[0], terminal_size=size, run_before=watch_settled())


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_replay_at_size(snap_compare, size: tuple[int, int]) -> None:
    """The cycle sample at its end: the answers keep tok/s, AL and the badge at every width."""
    port, _ = recording_port()

    async def at_the_end(pilot) -> None:
        await replay_started(pilot)
        await pilot.press("space")
        await pilot.press("end")
        # The play head jumps at once; the panel and the rows repaint a frame later (under load,
        # later than a fixed pause): wait for the end's own words, then for the frame.
        await wait_for_app(pilot, lambda: "END" in screen_text(app))
        await pilot.pause(0.3)

    app = SpecmonApp(port, mode="replay")
    assert snap_compare(app, terminal_size=size, run_before=at_the_end)
