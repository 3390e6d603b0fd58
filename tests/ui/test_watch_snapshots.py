"""SVG snapshots of the watch screen with several servers (a fake port and fixed views): engines
as sub-rows, a down server with its last error, the selected server in detail, a restarted one.
Committed under tests/ui/__snapshots__; never updated by CI (`--snapshot-update` is for a person
who has looked at the new picture)."""

from __future__ import annotations

from tests.support.ui_apps import watch_app, watch_settled
from tests.support.watch_views import watch_view

WIDE = (160, 48)


def test_watch_three_servers_one_down(snap_compare):
    assert snap_compare(watch_app(watch_view())[0], terminal_size=WIDE, run_before=watch_settled())


def test_watch_selected_down_server(snap_compare):
    assert snap_compare(
        watch_app(watch_view())[0], terminal_size=WIDE, run_before=watch_settled("down")
    )


def test_watch_restarted_server(snap_compare):
    view = watch_view(down=False, restarted=True)
    assert snap_compare(watch_app(view)[0], terminal_size=WIDE, run_before=watch_settled("down"))
