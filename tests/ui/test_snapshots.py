"""SVG snapshots of the chat at a fixed size (pytest-textual-snapshot), with the fake port so every
number is fixed. The snapshots are committed under tests/ui/__snapshots__; CI never updates them
(`--snapshot-update` is for a person who has looked at the new picture)."""

from __future__ import annotations

from tests.support.fake_views import session_view
from tests.support.ui_apps import (
    ANSWER,
    chat_app_with_view,
    chat_one_answer,
    chat_with_graphs,
    still,
)
from tests.support.ui_fakes import FakePort
from tests.support.waiting import wait_for_app

from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.port import Connection

SIZE = (100, 32)


def test_chat_with_one_answer(snap_compare):
    app = SpecmonApp(FakePort(answers=[ANSWER]), settings=ChatSettings(max_tokens=256))
    assert snap_compare(app, terminal_size=SIZE, run_before=chat_one_answer)


async def _connected(pilot) -> None:
    await wait_for_app(pilot, lambda: pilot.app.screen.connection is not None)
    still(pilot)
    await pilot.pause(0.2)


def test_server_unreachable(snap_compare):
    port = FakePort(
        Connection(None, "cannot use http://127.0.0.1:8000: /v1/models: APIConnectionError")
    )
    assert snap_compare(SpecmonApp(port), terminal_size=SIZE, run_before=_connected)


def test_terminal_too_small(snap_compare):
    assert snap_compare(SpecmonApp(FakePort()), terminal_size=(50, 12), run_before=_connected)


async def _settings(pilot) -> None:
    await _connected(pilot)
    await pilot.press("f2")
    await pilot.pause(0.1)
    still(pilot)
    await pilot.pause(0.2)


def test_settings_dialog(snap_compare):
    app = SpecmonApp(FakePort(), settings=ChatSettings(0.7, 0.95, 512))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settings)


# ---------------------------------------------------------------- the side panel and dashboard

WIDE = (160, 45)
NARROW = (100, 40)


def test_panel_healthy(snap_compare):
    app = chat_app_with_view(session_view(prefix="r"))
    assert snap_compare(app, terminal_size=WIDE, run_before=chat_with_graphs)


def test_panel_vanilla_flagged(snap_compare):
    app = chat_app_with_view(
        session_view(speeds=(60.0,) * 5, tokens_per_step=1, prefix="r", hot=True)
    )
    assert snap_compare(app, terminal_size=WIDE, run_before=chat_with_graphs)


def test_panel_no_gpu(snap_compare):
    app = chat_app_with_view(session_view(gpu=False, prefix="r"))
    assert snap_compare(app, terminal_size=WIDE, run_before=chat_with_graphs)


def test_panel_narrow_stacked(snap_compare):
    app = chat_app_with_view(session_view(prefix="r"))
    assert snap_compare(app, terminal_size=NARROW, run_before=chat_with_graphs)


async def _dashboard(pilot) -> None:
    await _connected(pilot)
    pilot.app.screen.refresh_panel()
    await pilot.pause(0.3)


def test_watch_dashboard(snap_compare):
    app = chat_app_with_view(session_view(), mode="watch")
    assert snap_compare(app, terminal_size=WIDE, run_before=_dashboard)
