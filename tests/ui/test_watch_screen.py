"""The watch screen: the servers table's text (pure), and pilot runs of its keys with a fake port
and deterministic multi-server views: selecting rows changes the detail, a adds a server (a bad
address is refused in the dialog), x / delete removes the selected one, the last one removed
leaves "no server: press a to add one", engines are sub-rows, a down server shows its error."""

from __future__ import annotations

from dataclasses import replace

from tests.support.session_feed import gpu_sample
from tests.support.ui_apps import WATCH_SIZE, watch_app, watch_ready
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from tests.support.watch_views import A, B, C, watch_view
from textual.widgets import Input

from specmon.core.events import GpuReading
from specmon.ui.screens.dialogs import AddServerScreen, check_server_url
from specmon.ui.screens.watch import DashboardScreen
from specmon.ui.widgets.servers_table import (
    EMPTY_TEXT,
    ServersTable,
    gpu_numbers,
    server_gpus,
    state_word,
    table_text,
)
from specmon.ui.widgets.side_panel import SidePanel, panel_sections

# ---------------------------------------------------------------- the table's text (pure)


def test_one_row_per_server_with_engine_sub_rows_and_a_down_servers_error() -> None:
    lines = table_text(watch_view(), 0).plain.splitlines()
    titles = ["server", "state", "tok/s", "AL", "acc%", "run", "wait", "KV%", "°C", "W"]
    assert lines[0].split() == titles
    assert lines[1].startswith("▶ 127.0.0.1:8000") and " up " in lines[1]
    assert lines[1].split()[3:6] == ["200.0", "3.33", "29"]  # engines summed / pooled
    assert lines[2].split()[:5] == ["└", "engine", "0", "160.0", "4.00"]
    assert lines[3].split()[:5] == ["└", "engine", "1", "40.0", "2.00"]
    assert lines[4].startswith("  10.0.0.7:8001") and " down " in lines[4]
    # A down server's own numbers are —, not its last ones; its error is under it.
    assert lines[4].split()[2:8] == ["—"] * 6
    assert lines[5].strip() == (
        "last error: 3 failures in a row: ConnectError: [Errno 111] Connection refused"
    )
    assert lines[6].startswith("  gpu-box-3:8000") and lines[6].split()[2:4] == ["150.0", "5.00"]


def test_number_columns_keep_their_width_whatever_is_missing() -> None:
    view = watch_view(down=False)
    rows = [line for line in table_text(view, 1).plain.splitlines()[1:] if "└" not in line]
    assert len({len(r) for r in rows}) == 1
    empty = replace(view.servers[0], window=replace(view.servers[0].window, decode_tok_s=None))
    one = replace(view, servers=(empty,))
    assert len(table_text(one, 0).plain.splitlines()[1]) == len(rows[0])


def test_a_restarted_server_says_so_then_up_again() -> None:
    view = watch_view(down=False, restarted=True)
    b = view.server(B)
    assert b is not None and b.counter_resets > 0
    assert state_word(b, view.t) == "restarted"
    assert state_word(b, b.recent_resets[-1].t + 31.0) == "up"
    assert " restarted " in table_text(view, 0).plain


def test_untrusted_error_text_is_shown_literally() -> None:
    view = watch_view()
    b = replace(view.server(B), status_detail="boom\x1b[31m [bold]red[/]\nnext")
    text = table_text(replace(view, servers=(b,)), 0).plain
    assert "\x1b" not in text and "[bold]red[/]" in text and "last error: boom" in text


def test_no_server_says_how_to_add_one() -> None:
    assert table_text(replace(watch_view(), servers=()), 0).plain == EMPTY_TEXT
    assert table_text(None, 0, waiting="connecting…").plain == "connecting…"


def test_gpus_are_attributed_by_host_or_to_a_lone_server() -> None:
    view = watch_view()
    remote = GpuReading(index=0, temperature_c=71.0, power_w=300.0, host="gpu-box-3")
    remote2 = GpuReading(index=1, temperature_c=65.0, power_w=250.0, host="gpu-box-3")
    other = GpuReading(index=0, temperature_c=50.0, power_w=100.0, host="elsewhere")
    gpu = replace(view.gpu, gpus=(remote, remote2, other))
    with_gpus = replace(view, gpu=gpu)
    assert server_gpus(with_gpus, view.server(C)) == (remote, remote2)
    assert gpu_numbers((remote, remote2)) == (71.0, 550.0)
    assert server_gpus(with_gpus, view.server(A)) == ()  # no guess among several servers
    line = next(x for x in table_text(with_gpus, 0).plain.splitlines() if "gpu-box-3" in x)
    assert line.split()[-2:] == ["71", "550"]
    lone = replace(view, servers=(view.server(A),))
    local = gpu_sample(1.0, temp=61.0).gpus
    assert server_gpus(replace(lone, gpu=replace(view.gpu, gpus=local)), view.server(A)) == local


def test_server_addresses_are_checked() -> None:
    assert check_server_url(" gpu-box:8000 ") == "http://gpu-box:8000"
    assert check_server_url("https://h/v1/") == "https://h"
    for bad, words in (
        ("", "type a server address"),
        ("ftp://h", "must be http or https"),
        ("http://", "no host"),
        ("http://h:99999", "bad port"),
    ):
        try:
            check_server_url(bad)
        except ValueError as exc:
            assert words in str(exc)
        else:
            raise AssertionError(f"{bad!r} accepted")


# ---------------------------------------------------------------- the screen (pilot)


def _table(app) -> str:
    return str(app.screen.query_one(ServersTable).render())


def _detail(app) -> str:
    return str(app.screen.query_one("#panel-server").render())


async def test_selecting_rows_changes_the_detail():
    app, _port = watch_app()
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert "vLLM 0.20.2" in _detail(app) and f"url    {A}" in _detail(app)
        await pilot.press("down")
        await wait_for_app(pilot, lambda: f"url    {B}" in _detail(app))
        assert "down" in _detail(app) and "Connection refused" in _detail(app)
        assert "vLLM 0.20.2" not in _detail(app)  # the first server's identity is not B's
        assert "▶ 10.0.0.7:8001" in screen_text(app)
        await pilot.press("j")
        await wait_for_app(pilot, lambda: f"url    {C}" in _detail(app))
        await pilot.press("j")  # past the last row: stays
        await pilot.pause(0.1)
        assert f"url    {C}" in _detail(app)
        # C's own numbers in the panel: AL 5.00 in the acceptance section
        assert "5.00" in str(app.screen.query_one("#panel-acceptance").render())
        await pilot.press("k")
        await pilot.press("up")
        await wait_for_app(pilot, lambda: f"url    {A}" in _detail(app))


async def test_engines_are_sub_rows_on_screen_and_the_footer_shows_the_keys():
    app, _port = watch_app()
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        text = screen_text(app)
        assert "└ engine 0" in text and "└ engine 1" in text
        assert "last error: 3 failures in a row" in text
        for words in ("add server", "remove server", "select", "record", "marker", "quit"):
            assert words in text


async def test_a_adds_a_server_and_a_bad_address_is_refused_in_the_dialog():
    app, port = watch_app()
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AddServerScreen))
        box = app.screen.query_one("#add-url", Input)
        box.value = "ftp://nope"
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: "must be http or https" in screen_text(app))
        assert isinstance(app.screen, AddServerScreen) and port.added == []
        box.value = "gpu-box-9:8000"
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: port.added == ["http://gpu-box-9:8000"])
        await wait_for_app(pilot, lambda: "watching http://gpu-box-9:8000" in screen_text(app))
        # Escape closes the dialog without adding
        await pilot.press("a")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AddServerScreen))
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert port.added == ["http://gpu-box-9:8000"]


async def test_x_and_delete_remove_the_selected_server_until_none_is_left():
    app, port = watch_app()
    async with app.run_test(size=WATCH_SIZE) as pilot:
        await watch_ready(pilot)
        await pilot.press("down")
        await pilot.press("x")
        await wait_for_app(pilot, lambda: port.removed == [B])
        await wait_for_app(pilot, lambda: "10.0.0.7" not in _table(app))
        assert "gpu-box-3" in _table(app) and "127.0.0.1:8000" in _table(app)
        # The selection moved to a row that is still there (C, the next one).
        await wait_for_app(pilot, lambda: f"url    {C}" in _detail(app))
        await pilot.press("delete")
        await wait_for_app(pilot, lambda: port.removed == [B, C])
        await pilot.press("x")
        await wait_for_app(pilot, lambda: port.removed == [B, C, A])
        await wait_for_app(pilot, lambda: _table(app) == EMPTY_TEXT)
        assert EMPTY_TEXT in screen_text(app)
        await pilot.press("x")  # nothing left: says so, removes nothing
        await wait_for_app(pilot, lambda: "no server to remove" in screen_text(app))
        assert port.removed == [B, C, A]
        assert app.screen.query_one(SidePanel) is not None


def test_the_detail_of_a_down_server_shows_dashes_and_keeps_since_start() -> None:
    view = watch_view()
    index = [s.source for s in view.servers].index(B)
    sections = {name: text.plain for name, text in panel_sections(view, None, server_index=index)}
    assert "● down" in sections["server"] and "Connection refused" in sections["server"]
    assert "server       —" in sections["speed"]
    assert "running   —  waiting   —  KV   —%" in sections["load"]
    acceptance = sections["acceptance"].splitlines()[1].split()
    assert acceptance == ["AL", "—", "3.00"]  # window —, since start kept
