"""SVG snapshots of the watch screen with several servers (a fake port and fixed views): engines
as sub-rows, a down server with its last error, the selected server in detail, a restarted one.
Committed under tests/ui/__snapshots__; never updated by CI (`--snapshot-update` is for a person
who has looked at the new picture)."""

from __future__ import annotations

from tests.support.ui_fakes import wait_for
from tests.ui.test_watch_screen import WatchPort
from tests.ui.watch_views import watch_view

from specmon.ui.app import SpecmonApp

WIDE = (160, 48)


def _app(view) -> SpecmonApp:
    port = WatchPort()
    port.fake_view = view
    return SpecmonApp(port, mode="watch")


def _ready(presses: tuple[str, ...]):
    async def run(pilot) -> None:
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
        for key in presses:
            await pilot.press(key)
        pilot.app.screen.refresh_panel()
        await pilot.pause(0.3)

    return run


def test_watch_three_servers_one_down(snap_compare):
    assert snap_compare(_app(watch_view()), terminal_size=WIDE, run_before=_ready(()))


def test_watch_selected_down_server(snap_compare):
    assert snap_compare(_app(watch_view()), terminal_size=WIDE, run_before=_ready(("down",)))


def test_watch_restarted_server(snap_compare):
    view = watch_view(down=False, restarted=True)
    assert snap_compare(_app(view), terminal_size=WIDE, run_before=_ready(("down",)))
