"""`specmon web demo` in a real browser: headless Chromium loads the page, the Textual app runs
in it (drawn by xterm.js on a canvas), and the dashboard's numbers are read from the page's
terminal buffer through the Chrome DevTools Protocol; a screenshot is taken. Ctrl-C then leaves
no process behind."""

from __future__ import annotations

import asyncio
import re
import struct
from pathlib import Path

from tests.support.web_serving import group_alive, start_web
from tests.web.browser import Chromium, wait_for_screen

ANSWER = re.compile(r"\d+ tokens · [\d.]+ tok/s · TTFT \d+ ms · AL [\d.]+")
SERVER_SPEED = re.compile(r"tok/s\s+server\s+\d+(\.\d+)?")
PANEL_AL = re.compile(r"AL\s+\d\.\d\d\s+\d\.\d\d")


def shows_numbers(lines: list[str]) -> bool:
    text = "\n".join(lines)
    return (
        "SIMULATED" in lines[0]
        and ANSWER.search(text) is not None
        and SERVER_SPEED.search(text) is not None
        and PANEL_AL.search(text) is not None
    )


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_demo_in_headless_chromium_shows_simulated_numbers(chromium, tmp_path: Path):
    run = start_web("demo", "--speed", "20")
    browser = Chromium(width=1400, height=900)
    try:

        async def scenario() -> tuple[list[str], bytes]:
            async with browser.page(run.open_url) as tools:
                lines = await wait_for_screen(tools, shows_numbers)
                shot = await tools.screenshot(tmp_path / "web.png")
                return lines, shot

        try:
            lines, shot = asyncio.run(scenario())
            (app,) = run.apps()
        finally:
            browser.close()
        code = run.stop()
        left = group_alive(app)
    finally:
        run.kill()

    text = "\n".join(lines)
    assert lines[0].rstrip().endswith("SIMULATED")  # the header's badge, on top
    assert "per-position acceptance" in text
    speed = SERVER_SPEED.search(text)
    assert speed is not None and float(speed.group(0).split()[-1]) > 0
    width, height = png_size(shot)
    assert width >= 1000 and height >= 600
    assert len(shot) > 50_000  # a drawn screen, not an empty page
    assert code == 130
    assert not left, "the page's app outlived `specmon web`"


def test_the_token_guards_the_page_in_chromium_and_a_second_profile_is_refused(chromium):
    """The token (docs/web.md) in a real browser: without the token the page is 403 and no app
    starts; the printed address opens the app (the token leaves the address bar, the cookie is out
    of the page's reach); the page has a title and asks no other host; a second browser profile,
    which has not the cookie, gets 403."""
    run = start_web("demo", "--speed", "20")
    first = Chromium(width=1200, height=800)
    second: Chromium | None = None
    try:

        async def scenario() -> dict[str, object]:
            nonlocal second
            found: dict[str, object] = {}
            async with first.page(run.url + "/") as tools:
                found["refused"] = await tools.text_when(lambda t: "403" in t)
                found["apps_refused"] = run.apps()
                await tools.call("Page.navigate", url=run.open_url)
                lines = await wait_for_screen(tools, lambda ls: "SIMULATED" in ls[0])
                found["screen"] = lines[0]
                found["href"] = await tools.evaluate("location.href")
                found["title"] = await tools.evaluate("document.title")
                found["cookie"] = await tools.evaluate("document.cookie")
                found["requests"] = tools.requested_urls()
                found["apps"] = run.apps()
                second = Chromium(width=800, height=600)
                async with second.page(run.url + "/") as other:
                    found["other"] = await other.text_when(lambda t: "403" in t)
                found["apps_after"] = run.apps()
            return found

        try:
            found = asyncio.run(scenario())
        finally:
            first.close()
            if second is not None:
                second.close()
        code = run.stop()
    finally:
        run.kill()

    assert "403 forbidden" in str(found["refused"])
    assert found["apps_refused"] == []
    assert found["href"] == run.url + "/"  # the token is not left in the address bar
    assert found["title"] == "specmon demo --speed 20"
    assert found["cookie"] == ""  # HttpOnly: the page's scripts cannot read it
    requests = [str(u) for u in found["requests"]]  # type: ignore[union-attr]
    assert any(u.startswith(run.url + "/static/") for u in requests), requests
    hosts = {u.split("/")[2] for u in requests if u.startswith(("http:", "https:", "ws:"))}
    assert hosts == {run.url.split("/")[2]}, requests
    assert "403 forbidden" in str(found["other"])
    assert len(found["apps"]) == 1  # type: ignore[arg-type]
    assert found["apps_after"] == found["apps"]  # the refused profile started nothing
    assert code == 130
