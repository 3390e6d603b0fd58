"""Headless Chromium driven through the Chrome DevTools Protocol, for the `specmon web` tests and
docs/images/web_screenshot.py: start Chromium, open a page, read the text xterm.js holds in its
terminal buffer (textual-serve draws on a canvas, so the text is not in the DOM), take a
screenshot.

How the text is read: before the page's own scripts run, a hook is installed (CDP
`Page.addScriptToEvaluateOnNewDocument`) that notices the first xterm.js `Terminal` assigned to a
property named `terminal` (textual-serve's page keeps its terminal there) and exposes a function
returning the terminal's visible lines, as xterm renders them (`buffer.active.getLine(y)
.translateToString`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from tests.support.waiting import wait_for_async

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)

TERMINAL_HOOK = """
(() => {
  const seen = [];
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    set(value) {
      Object.defineProperty(this, "terminal", {
        value, writable: true, configurable: true, enumerable: true,
      });
      if (value && typeof value.write === "function" && value.buffer && !seen.length) {
        seen.push(value);
      }
    },
  });
  window.__specmonScreen = () => {
    const term = seen[0];
    if (!term) return null;
    const buffer = term.buffer.active;
    const lines = [];
    for (let y = 0; y < term.rows; y++) {
      const line = buffer.getLine(buffer.viewportY + y);
      lines.push(line ? line.translateToString(true) : "");
    }
    return {cols: term.cols, rows: term.rows, lines};
  };
})();
"""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """One CDP connection to a page target: `call(method, **params)` returns the result."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        """The protocol's events read so far (`method`, `params`), oldest first."""

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = await self._ws.receive(timeout=60)
            if message.type != aiohttp.WSMsgType.TEXT:
                raise ConnectionError(f"DevTools connection ended: {message.type!r}")
            data = json.loads(message.data)
            if "method" in data and "id" not in data:
                self.events.append(data)
                continue
            if data.get("id") != message_id:
                continue  # an answer to nobody
            if "error" in data:
                raise RuntimeError(f"{method}: {data['error']}")
            return dict(data.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for (after `Network.enable`), as read so far."""
        return [
            str(e["params"]["request"]["url"])
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    async def text_when(self, predicate: Any, limit_s: float = 60.0) -> str:
        """Poll the page's text (`document.body.innerText`) until `predicate(text)` holds."""
        deadline = time.monotonic() + limit_s
        text = ""
        while time.monotonic() < deadline:
            value = await self.evaluate("document.body ? document.body.innerText : ''")
            text = str(value or "")
            if predicate(text):
                return text
            await asyncio.sleep(0.2)
        raise AssertionError(f"gave up waiting for the page's text; it shows: {text[:400]!r}")

    async def screen(self) -> list[str] | None:
        """The terminal's visible lines, or None before the page made its terminal."""
        value = await self.evaluate("window.__specmonScreen ? window.__specmonScreen() : null")
        return None if value is None else list(value["lines"])

    async def screenshot(self, path: Path) -> bytes:
        result = await self.call("Page.captureScreenshot", format="png")
        data = base64.b64decode(result["data"])
        path.write_bytes(data)
        return data


class Chromium:
    """A headless Chromium in a process group of its own, with a throw-away profile."""

    def __init__(self, *, width: int = 1400, height: int = 900) -> None:
        exe = chromium_path()
        if exe is None:
            raise FileNotFoundError("chromium is not installed")
        self._profile = tempfile.mkdtemp(prefix="specmon-chromium-")
        self.process = subprocess.Popen(
            [
                exe,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def devtools_port(self, limit_s: float = 60.0) -> int:
        """Chromium writes its DevTools port in the profile once it listens."""
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    @contextlib.asynccontextmanager
    async def page(self, url: str) -> AsyncIterator[DevTools]:
        """A DevTools connection to the first tab, with the terminal hook installed, after
        navigating it to `url`."""
        port = self.devtools_port()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as answer:
                targets = await answer.json(content_type=None)
            page = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                tools = DevTools(ws)
                await tools.call("Page.enable")
                await tools.call("Network.enable")
                await tools.call("Page.addScriptToEvaluateOnNewDocument", source=TERMINAL_HOOK)
                await tools.call("Page.navigate", url=url)
                yield tools

    def close(self) -> None:
        """Stop Chromium's whole process group (renderers, zygotes) and remove the profile."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)


async def wait_for_screen(
    tools: DevTools, predicate: Any, limit_s: float = 90.0, poll_s: float = 0.5
) -> list[str]:
    """Poll the terminal's lines until `predicate(lines)` holds; the last lines on failure."""
    last: list[str] | None = None

    async def shown() -> list[str] | None:
        nonlocal last
        last = await tools.screen()
        return last if last is not None and predicate(last) else None

    return await wait_for_async(
        shown,
        "the page's terminal",
        timeout=limit_s,
        interval=poll_s,
        detail=lambda: "it shows:\n" + "\n".join(last or ["(no terminal)"]),
    )
