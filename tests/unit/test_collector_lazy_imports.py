"""A live session starts without importing the stream client's HTTP stack (~0.9 s of the
`connecting…` time after chat's first frame was once the collector process, and the app's
connect worker, importing the OpenAI SDK before identifying the server; aiohttp, what streams
now, costs ~0.2 s). It is imported on the first chat; the time to `up` is measured by
benchmarks/first_frame.py, this test checks the behaviour that makes it short."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_after(body: str) -> list[str]:
    names = ["openai", "aiohttp"]
    code = f"import json, sys\n{body}print(json.dumps([n in sys.modules for n in {names!r}]))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[bool] = json.loads(done.stdout.splitlines()[-1])
    return [n for n, here in zip(names, loaded, strict=True) if here]


def test_the_session_and_a_stream_client_import_no_http_stack():
    body = (
        "from specmon.runtime.session import CollectorProcess, collector_main\n"
        "from specmon.sources.stream_client import StreamClient\n"
        "StreamClient('http://127.0.0.1:9')\n"
    )
    assert _loaded_after(body) == []


def test_the_first_request_imports_aiohttp_and_never_openai():
    body = (
        "import asyncio\n"
        "from specmon.sources.stream_client import ChatRequest, StreamClient\n"
        "async def go():\n"
        "    async with StreamClient('http://127.0.0.1:9') as client:\n"
        "        await client.chat(ChatRequest('hi', model='m'), lambda e: None)\n"
        "asyncio.run(go())\n"
    )
    assert _loaded_after(body) == ["aiohttp"]
