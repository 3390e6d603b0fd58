"""A live session starts without importing the OpenAI SDK (docs/benchmarks.md, "First frame and time
to up": ~0.9 s of the `connecting…` time after chat's first frame was the collector process, and the
app's connect worker, importing openai before identifying the server). The SDK is imported on the
first chat; the time to `up` is measured by benchmarks/first_frame.py, this test checks the
behaviour that makes it short."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_after(body: str) -> list[str]:
    code = f"import json, sys\n{body}print(json.dumps(['openai' in sys.modules]))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[bool] = json.loads(done.stdout.splitlines()[-1])
    return ["openai"] if loaded[0] else []


def test_the_session_and_a_stream_client_import_no_openai():
    body = (
        "from specmon.runtime.session import CollectorProcess, collector_main\n"
        "from specmon.sources.stream_client import StreamClient\n"
        "StreamClient('http://127.0.0.1:9')\n"
    )
    assert _loaded_after(body) == []


def test_the_first_use_of_the_sdk_imports_it():
    body = (
        "from specmon.sources.stream_client import StreamClient\n"
        "StreamClient('http://127.0.0.1:9').sdk()\n"
    )
    assert _loaded_after(body) == ["openai"]
