"""A `specmon web` page seen through textual-serve's websocket protocol (what the page's script
speaks): opening one, reading the app's terminal output, the app processes behind the pages."""

from __future__ import annotations

import asyncio
import re

import aiohttp
from tests.support.waiting import wait_for
from tests.support.web_serving import WAIT_LIMIT_S, WebRun

PAGE_SIZE = {"width": 140, "height": 40}
"""The terminal size a test page asks for."""


async def read_screen_until(
    ws: aiohttp.ClientWebSocketResponse, pattern: bytes, limit_s: float = WAIT_LIMIT_S
) -> bytes:
    """The app's terminal output, until `pattern` (a regex) shows in it."""
    seen = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        try:
            message = await ws.receive(timeout=1.0)
        except TimeoutError:
            continue
        if message.type == aiohttp.WSMsgType.BINARY:
            seen += message.data
            if re.search(pattern, seen):
                return seen
        elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            break
    raise AssertionError(f"the page never showed {pattern!r}; last output: {seen[-400:]!r}")


async def open_page(http: aiohttp.ClientSession, run: WebRun) -> aiohttp.ClientWebSocketResponse:
    """A page's websocket to the app (PAGE_SIZE), as the page's script opens it."""
    ws = await http.ws_connect(
        f"{run.ws_url}?width={PAGE_SIZE['width']}&height={PAGE_SIZE['height']}", headers=run.headers
    )
    await ws.send_json(["resize", PAGE_SIZE])
    return ws


def app_groups(run: WebRun, count: int) -> list[int]:
    """The process groups of the web server's apps, once there are `count`."""
    wait_for(lambda: len(run.apps()) == count, f"{count} app process(es)")
    return run.apps()
