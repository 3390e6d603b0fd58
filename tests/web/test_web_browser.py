"""`specmon web demo` in a real browser: headless Chromium loads the page, the Textual app runs
in it (drawn by xterm.js on a canvas), and the dashboard's numbers are read from the page's
terminal buffer through the Chrome DevTools Protocol; a screenshot is taken. Ctrl-C then leaves
no process behind."""

from __future__ import annotations

import asyncio
import re
import struct
from pathlib import Path

from tests.web.browser import Chromium, wait_for_screen
from tests.web.serving import group_alive, start_web

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
