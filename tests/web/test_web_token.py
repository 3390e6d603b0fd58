"""`specmon web`'s token (docs/web.md, "Who can open it"), with the server as a real process:
without the cookie every request, page, static file or WebSocket, gets 403 and no app process
starts; the printed address sets an HttpOnly, SameSite=Strict cookie; a WebSocket from another
origin is refused even with the cookie; the token file is the owner's only and goes at stop; the
page has a title and asks no other host; no secret is in the command line of any process the server
starts."""

from __future__ import annotations

import asyncio
import re
import stat
from pathlib import Path

import aiohttp
import pytest
from tests.support.waiting import wait_for
from tests.support.web_pages import PAGE_SIZE, app_groups, open_page, read_screen_until
from tests.support.web_serving import (
    WAIT_LIMIT_S,
    WebRun,
    children,
    cmdline,
    run_web,
    start_web,
)

from specmon.sim.server import SimConfig, start_in_thread

TOKEN_FILE = re.compile(r"token also in (\S+);")


def token_file_of(run: WebRun) -> Path:
    found = TOKEN_FILE.search("".join(run.lines))
    assert found, run.lines
    return Path(found.group(1))


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


async def refused_socket(run: WebRun, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(
                f"{run.ws_url}?width={PAGE_SIZE['width']}&height={PAGE_SIZE['height']}",
                headers=headers,
            )
        return refused.value.status


def test_without_the_token_everything_is_403_and_no_app_starts():
    run = start_web("demo", "--speed", "20")
    try:
        assert run.token and len(run.token) >= 32
        file = token_file_of(run)
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert file.read_text().strip() == run.token

        async def scenario() -> list[int]:
            statuses = []
            async with aiohttp.ClientSession() as http:
                for path in ("/", "/static/js/textual.js", "/?token=wrong", "/download/x"):
                    async with http.get(run.url + path, allow_redirects=False) as answer:
                        statuses.append(answer.status)
                wrong = {"Cookie": f"specmon-web-{run.port}=not-the-token"}
                async with http.get(run.url + "/", headers=wrong) as answer:
                    statuses.append(answer.status)
            statuses.append(await refused_socket(run, {}))
            statuses.append(await refused_socket(run, wrong))
            return statuses

        assert asyncio.run(scenario()) == [403] * 7
        assert run.apps() == []  # a refused page starts nothing
        assert run.stop() == 130
        assert not file.exists()  # the default token file goes with the server
        assert run.seen_apps == set()
    finally:
        run.kill()


def test_the_printed_address_sets_a_strict_httponly_cookie_that_opens_the_app():
    run = start_web("demo", "--speed", "20")
    try:

        async def scenario() -> None:
            async with aiohttp.ClientSession() as http:
                async with http.get(run.open_url, allow_redirects=False) as answer:
                    assert answer.status == 303
                    assert answer.headers["Location"] == "/"  # the token leaves the address
                    cookie = answer.headers["Set-Cookie"]
                assert cookie.startswith(f"specmon-web-{run.port}={run.token};")
                assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
                async with http.get(run.url + "/", headers=run.headers) as page:
                    assert page.status == 200
                    html = await page.text()
                assert "<title>specmon demo --speed 20</title>" in html
                # Every address the page loads from (href, src, CSS url()) is this server's.
                refs = re.findall(r"""(?:href|src)="([^"]+)"|url\("?([^")]+)"?\)""", html)
                urls = [a or b for a, b in refs]
                assert urls, html
                assert all(u.startswith(run.url + "/") for u in urls), urls
                assert "googleapis" not in html
                ws = await open_page(http, run)
                await read_screen_until(ws, rb"SIMULATED")
                app_groups(run, 1)

        asyncio.run(scenario())
        assert run.stop() == 130
    finally:
        run.kill()


def test_a_websocket_from_another_origin_is_refused_even_with_the_cookie():
    run = start_web("demo", "--speed", "20")
    try:
        foreign = {**run.headers, "Origin": "http://evil.example"}
        assert asyncio.run(refused_socket(run, foreign)) == 403
        assert run.apps() == []
    finally:
        run.kill()


def test_a_kept_token_file_is_reused_and_a_shared_one_refused(tmp_path):
    file = tmp_path / "web.token"
    file.write_text("kept-token-0123456789abcdef\n")
    file.chmod(0o644)
    done = run_web("demo", "--token-file", str(file), "--port", "0")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "chmod 600" in done.stderr
    file.chmod(0o600)
    run = start_web("demo", "--token-file", str(file))
    try:
        assert run.token == "kept-token-0123456789abcdef"
        assert run.stop() == 130
        assert file.exists()  # the user's file stays
    finally:
        run.kill()


def test_no_token_serves_loopback_pages_but_not_a_foreign_host_name():
    run = start_web("demo", "--speed", "20", "--no-token", "--allow-any-local-user")
    try:
        assert run.token is None

        async def scenario() -> tuple[int, int]:
            async with aiohttp.ClientSession() as http:
                async with http.get(run.url + "/") as page:
                    ok = page.status
                # A page of another site whose name resolves to 127.0.0.1 (DNS rebinding).
                async with http.get(run.url + "/", headers={"Host": "evil.example"}) as page:
                    rebound = page.status
            return ok, rebound

        assert asyncio.run(scenario()) == (200, 403)
    finally:
        run.kill()


@pytest.mark.parametrize("scheme", ["http://", ""])
def test_no_secret_is_in_the_command_line_of_any_process_the_server_starts(scheme):
    """The issue's second finding: `user:pass@` in a served URL showed in `ps`; later, the same
    without a scheme (`--attach alice:pw@host:port`). The password, the API key and the token
    must be in no /proc/*/cmdline of the server's processes (the app, its collector,
    multiprocessing's helpers), and the app still reaches the server."""
    password = "pw-argv-secret-7"
    key = "sk-argv-secret-0123456789"
    with start_in_thread(SimConfig(speed=50.0, n_spec=8, seed=1), log_sink=lambda _l: None) as sim:
        bare = sim.url.removeprefix("http://")
        attach = f"{scheme}alice:{password}@{bare}"
        run = start_web("watch", "--attach", attach, "--api-key", key)
        try:

            async def scenario() -> list[str]:
                async with aiohttp.ClientSession() as http:
                    ws = await open_page(http, run)
                    await read_screen_until(ws, rb"SIMULATED")
                    app_groups(run, 1)
                    wait_for(lambda: len(descendants(run.proc.pid)) >= 2, "the collector")
                    # The server's own command line is the user's; its children's are ours.
                    return [cmdline(p) for p in descendants(run.proc.pid)]

            lines = asyncio.run(scenario())
            assert len(lines) >= 2, lines
            for line in lines:
                assert password not in line and key not in line, line
                assert run.token is not None and run.token not in line, line
            assert any(f"--attach {scheme}{bare} " in line for line in lines), lines
            assert not any(password in line or key in line for line in run.lines)
        finally:
            run.kill()


def test_the_server_stops_within_bounds_after_refusing():
    """A refused page does not keep the server from stopping at once."""
    run = start_web("demo")
    try:
        assert asyncio.run(refused_socket(run, {})) == 403
        assert run.proc.poll() is None
        assert run.stop() == 130
        assert run.proc.wait(timeout=WAIT_LIMIT_S) == 130
    finally:
        run.kill()


def test_an_abbreviated_api_key_option_is_refused_before_anything_starts():
    """`--api-ke KEY` was not taken off the app's command line (the check looked for
    `--api-key`) and the app's parser read it as --api-key: the key was in `ps`."""
    secret = "sk-abbrev-argv-0123456789"
    done = run_web("watch", "--attach", "http://127.0.0.1:9", "--api-ke", secret, "--port", "0")
    assert done.returncode == 2
    assert done.stderr == (
        "specmon web: --api-ke is not an option: write --api-key in full (options are not "
        "abbreviated)\n"
    )
    assert secret not in done.stdout


def test_the_token_file_goes_under_xdg_state_home_without_a_runtime_directory(tmp_path):
    state = tmp_path / "state"
    run = start_web("demo", environ={"XDG_RUNTIME_DIR": None, "XDG_STATE_HOME": str(state)})
    try:
        file = token_file_of(run)
        assert file == state / "specmon" / f"web-{run.port}.token"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
        assert file.read_text().strip() == run.token
        assert run.stop() == 130
        assert not file.exists()
    finally:
        run.kill()
