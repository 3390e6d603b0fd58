"""The `a` dialog (docs/app.md, "Watching many servers"): a server added while watching gets no key
unless one is typed for it; the key field is masked, and what is typed goes with that server
only."""

from __future__ import annotations

from tests.support.ui_apps import WATCH_SIZE, WatchPort, watch_ready
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from tests.support.watch_views import watch_view
from textual.widgets import Input

from specmon.ui.app import SpecmonApp
from specmon.ui.screens.dialogs import AddServerScreen
from specmon.ui.screens.watch import DashboardScreen


class KeyedPort(WatchPort):
    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str | None] = []

    def add_target(self, url: str, *, api_key: str | None = None) -> str:
        self.keys.append(api_key)
        return super().add_target(url)


async def test_a_key_typed_in_the_dialog_goes_with_that_server_and_is_masked():
    port = KeyedPort()
    port.fake_view = watch_view()
    app = SpecmonApp(port, mode="watch")
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AddServerScreen))
        app.screen.query_one("#add-url", Input).value = "gpu-box-9:8000"
        key_box = app.screen.query_one("#add-key", Input)
        assert key_box.password
        key_box.value = "typed-key-0123456789"
        assert "typed-key-0123456789" not in screen_text(app)
        key_box.focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: port.added == ["http://gpu-box-9:8000"])
        assert port.keys == ["typed-key-0123456789"]
        await wait_for_app(pilot, lambda: isinstance(app.screen, DashboardScreen))
        # Without a key typed: none is sent (the command line's key is not for this server).
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AddServerScreen))
        app.screen.query_one("#add-url", Input).value = "gpu-box-10:8000"
        app.screen.query_one("#add-url", Input).focus()
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: len(port.added) == 2)
        assert port.keys == ["typed-key-0123456789", None]
