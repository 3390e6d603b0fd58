"""Make the README's browser screenshot from a real run: `specmon web demo` served on a free
loopback port at the simulator's real-time pace, opened in headless Chromium (the same driver as
tests/web), left to run until the demo's degradation cycle has flagged an answer at vanilla speed
(a minute or two), then Chromium's own screenshot of the page. Look at the result.

Usage: python docs/images/web_screenshot.py [OUT_FILE]   (default docs/images/web.png)
Needs chromium (Debian: apt-get install chromium).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.web: the browser driver shared with the tests

from tests.web.browser import Chromium, wait_for_screen  # noqa: E402
from tests.support.web_serving import start_web  # noqa: E402

SIZE = (1400, 860)
FLAGGED = re.compile(r"vanilla-speed\s+[1-9]")
AFTER_FLAG = re.compile(r"VANILLA SPEED")


def ready(lines: list[str]) -> bool:
    """A flagged answer on screen, with the side panel's counts saying so."""
    text = "\n".join(lines)
    return FLAGGED.search(text) is not None and AFTER_FLAG.search(text) is not None


async def shoot(out: Path) -> None:
    # The user's own stored baselines and config stay out of the picture (as in the tests).
    scratch = tempfile.mkdtemp(prefix="specmon-web-shot-")
    os.environ["XDG_DATA_HOME"] = str(Path(scratch) / "data")
    os.environ["XDG_CONFIG_HOME"] = str(Path(scratch) / "config")
    run = start_web("demo")  # real-time pace: the numbers a DFlash box would show
    browser = Chromium(width=SIZE[0], height=SIZE[1])
    try:
        async with browser.page(run.open_url) as tools:
            await wait_for_screen(tools, ready, limit_s=300)
            await asyncio.sleep(1.0)  # let the frame that showed it settle
            await tools.screenshot(out)
    finally:
        browser.close()
        run.stop()
        run.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "web.png"
    asyncio.run(shoot(target))
