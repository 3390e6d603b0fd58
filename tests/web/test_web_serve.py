"""`specmon web` as a real process, driven through textual-serve's own websocket protocol (what
the page's script speaks): each page gets its own app process in a process group of its own; the
app is the real Textual app (its screen arrives as terminal output); closing the page ends its
app; Ctrl-C or SIGTERM ends every app and the server, leaving no process behind; a port in use
and a host that is not loopback are said in one line each."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from tests.support.waiting import wait_for
from tests.support.web_pages import app_groups, open_page, read_screen_until
from tests.support.web_serving import (
    WAIT_LIMIT_S,
    WebRun,
    cmdline,
    group_alive,
    live_pids,
    run_web,
    start_web,
)

from specmon.sim.server import SimConfig, start_in_thread


@pytest.fixture
def web_demo() -> Iterator[WebRun]:
    run = start_web("demo", "--speed", "20")
    try:
        yield run
    finally:
        run.kill()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_each_page_runs_its_own_app_and_a_signal_stops_them_all(web_demo, signum, code):
    async def scenario() -> list[int]:
        async with aiohttp.ClientSession() as http:
            pages = [await open_page(http, web_demo) for _ in range(2)]
            for ws in pages:  # the real app: its SIMULATED badge and an answer's numbers
                await read_screen_until(ws, rb"SIMULATED")
                await read_screen_until(ws, rb"\d+ tokens \xc2\xb7 [\d.]+ tok/s")
            apps = app_groups(web_demo, 2)
            for pid in apps:
                assert "-m specmon demo --speed 20" in cmdline(pid)
                assert group_alive(pid)
            assert web_demo.stop(signum) == code
            return apps

    apps = asyncio.run(scenario())
    for pid in apps:
        assert not group_alive(pid), f"app group {pid} outlived the server: {group_alive(pid)}"


def test_a_stop_while_apps_are_starting_leaves_none_of_them():
    """Ctrl-C right after pages connect, while their apps are being started (before any first
    frame): every app that was started is stopped too."""
    marker = ("--speed", "20", "--max-tokens", "97")  # only this test serves these arguments

    def started_here() -> list[int]:
        return [
            pid
            for pid in live_pids()
            if "-m specmon demo --speed 20 --max-tokens 97" in cmdline(pid)
        ]

    run = start_web("demo", *marker)
    try:

        async def scenario() -> int:
            async with aiohttp.ClientSession() as http:
                await asyncio.gather(*(open_page(http, run) for _ in range(3)))
                return run.stop()

        assert asyncio.run(scenario()) == 130
        assert started_here() == []
    finally:
        run.kill()


def test_apps_do_not_outlive_a_server_killed_without_its_clean_stop(web_demo):
    """SIGKILL leaves no clean stop: the kernel's parent-death signal (SIGTERM) ends each app,
    and the app's own stop ends the rest of its group."""

    async def scenario() -> int:
        async with aiohttp.ClientSession() as http:
            ws = await open_page(http, web_demo)
            await read_screen_until(ws, rb"SIMULATED")
            (app,) = app_groups(web_demo, 1)
            wait_for(lambda: len(group_alive(app)) >= 2, "the app's collector process")
            web_demo.proc.kill()
            web_demo.proc.wait(timeout=WAIT_LIMIT_S)
            return app

    app = asyncio.run(scenario())
    wait_for(lambda: not group_alive(app), "the orphaned app group to end by itself")


def test_each_app_leads_a_process_group_of_its_own(web_demo):
    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            ws = await open_page(http, web_demo)
            await read_screen_until(ws, rb"SIMULATED")
            (app,) = app_groups(web_demo, 1)
            assert "-m specmon demo --speed 20" in cmdline(app)
            assert app in group_alive(app)  # it leads its group: pgid == its pid
            # the collector process (started by the app) runs in the app's group too
            wait_for(lambda: len(group_alive(app)) >= 2, "the app's collector process")
            members = group_alive(app)
            assert any("multiprocessing" in cmdline(p) for p in members), members
            assert web_demo.proc.pid not in members

    asyncio.run(scenario())


def test_closing_the_page_ends_its_app_and_the_server_goes_on(web_demo):
    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            ws = await open_page(http, web_demo)
            await read_screen_until(ws, rb"SIMULATED")
            (app,) = app_groups(web_demo, 1)
            await ws.close()
            wait_for(lambda: not group_alive(app), "the closed page's app group to end")
            assert web_demo.proc.poll() is None
            again = await open_page(http, web_demo)  # a new page gets a new app
            await read_screen_until(again, rb"SIMULATED")
            (second,) = app_groups(web_demo, 1)
            assert second != app

    asyncio.run(scenario())
    assert web_demo.stop() == 130


def test_quitting_the_app_in_the_page_ends_its_process(web_demo):
    """ctrl+q typed in the page (textual-serve's "stdin" message) quits the app; the page's
    connection closes and no process of it is left."""

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            ws = await open_page(http, web_demo)
            await read_screen_until(ws, rb"SIMULATED")
            (app,) = app_groups(web_demo, 1)
            await ws.send_json(["stdin", "\x11"])  # ctrl+q
            wait_for(lambda: not group_alive(app), "the app to quit")
            message = await ws.receive(timeout=WAIT_LIMIT_S)
            while message.type == aiohttp.WSMsgType.BINARY:
                message = await ws.receive(timeout=WAIT_LIMIT_S)
            assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)

    asyncio.run(scenario())
    assert web_demo.stop() == 130


def test_watch_is_served_against_a_running_server_and_its_api_key_stays_secret():
    """`--api-key` reaches the app through its environment: not in the app's command line
    (`ps` shows it), not in the page, not in what the server prints."""
    secret = "sk-web-test-0123456789"
    config = SimConfig(speed=50.0, n_spec=8, seed=1)
    with start_in_thread(config, log_sink=lambda _line: None) as sim:
        run = start_web("watch", "--attach", sim.url, "--api-key", secret)
        try:

            async def scenario() -> None:
                async with aiohttp.ClientSession() as http:
                    async with http.get(run.url + "/", headers=run.headers) as page:
                        html = await page.text()
                    assert "specmon watch --attach" in html  # the page's title
                    assert secret not in html
                    ws = await open_page(http, run)
                    await read_screen_until(ws, rb"SIMULATED")
                    await read_screen_until(ws, rb"per-position acceptance")
                    (app,) = app_groups(run, 1)
                    assert f"-m specmon watch --attach {sim.url}" in cmdline(app)
                    assert secret not in cmdline(app)
                    environ = Path(f"/proc/{app}/environ").read_bytes().split(b"\0")
                    assert f"OPENAI_API_KEY={secret}".encode() in environ

            asyncio.run(scenario())
            assert run.stop() == 130
            assert not any(secret in line for line in run.lines), run.lines
        finally:
            run.kill()


def test_pages_beyond_max_tabs_are_told_so_and_start_no_app():
    run = start_web("demo", "--speed", "20", "--max-tabs", "1")
    try:

        async def scenario() -> None:
            async with aiohttp.ClientSession() as http:
                first = await open_page(http, run)
                await read_screen_until(first, rb"SIMULATED")
                second = await open_page(http, run)
                said = await read_screen_until(second, rb"1 tab\(s\) are open already")
                assert b"--max-tabs" in said
                message = await second.receive(timeout=WAIT_LIMIT_S)
                assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
                assert len(run.apps()) == 1  # the second page started nothing
                await first.send_json(["ping", "still there?"])  # the first page lives on
                answer = await first.receive(timeout=WAIT_LIMIT_S)
                while answer.type == aiohttp.WSMsgType.BINARY:
                    answer = await first.receive(timeout=WAIT_LIMIT_S)
                assert answer.json() == ["pong", "still there?"]

        asyncio.run(scenario())
        assert run.stop() == 130
    finally:
        run.kill()


def test_a_port_in_use_is_one_line_and_exit_status_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_web("demo", "--port", str(port))
    assert done.returncode == 2
    assert done.stderr == f"specmon web: port {port} on 127.0.0.1 is in use\n"
    assert done.stdout == ""


def test_a_host_that_is_not_loopback_is_warned_about():
    """Checked without listening on every interface: the port is taken on loopback, which
    0.0.0.0 includes, so the command warns and then stops at the bind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_web("demo", "--host", "0.0.0.0", "--port", str(port))
    lines = done.stderr.splitlines()
    assert done.returncode == 2
    assert lines[0].startswith("specmon web: warning: --host 0.0.0.0 is not a loopback address")
    assert "token travel unencrypted" in lines[0]
    assert lines[1:] == [f"specmon web: port {port} on 0.0.0.0 is in use"]


def test_loopback_is_not_warned_about(web_demo):
    assert web_demo.stop() == 130
    assert not any("warning" in line for line in web_demo.lines), web_demo.lines
    assert web_demo.url.startswith("http://127.0.0.1:")


def test_replay_is_served():
    recording = Path(__file__).resolve().parents[2] / "recordings" / "demo-cycle.ndjson.gz"
    run = start_web("replay", str(recording))
    try:

        async def scenario() -> None:
            async with aiohttp.ClientSession() as http:
                ws = await open_page(http, run)
                await read_screen_until(ws, rb"SIMULATED", limit_s=30)

        asyncio.run(scenario())
    finally:
        run.kill()
