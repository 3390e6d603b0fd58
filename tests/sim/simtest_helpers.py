"""Helpers for the sim tests: read SSE streams and /metrics pages the way a client would."""

from __future__ import annotations

import json
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "How do I tell if speculation helps?"}]


def chat_body(max_tokens: int = 64, continuous: bool = True, **extra: Any) -> dict:
    body: dict[str, Any] = {
        "messages": MESSAGES,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": continuous},
    }
    body.update(extra)
    return body


def sse_messages(raw: str) -> list[str]:
    """The `data:` payloads of an SSE body, in order (`[DONE]` included)."""
    out = []
    for event in raw.split("\n\n"):
        if event.strip():
            assert event.startswith("data: "), event
            out.append(event[len("data: ") :])
    return out


def stream(url: str, body: dict, path: str = CHAT, headers: dict | None = None) -> list[Any]:
    """POST a streamed request; the parsed JSON chunks, and the string "[DONE]" if it came."""
    with httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(path, json=body, headers=headers or {})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return [m if m == "[DONE]" else json.loads(m) for m in sse_messages(response.text)]


def step_tokens(chunks: list[Any]) -> list[int]:
    """Tokens carried by each chunk with choices, from the cumulative continuous usage."""
    out = []
    previous = 0
    for chunk in chunks:
        if chunk == "[DONE]" or not chunk["choices"]:
            continue
        total = chunk["usage"]["completion_tokens"]
        out.append(total - previous)
        previous = total
    return out


def scrape(url: str) -> dict[str, Any]:
    """The /metrics page parsed by prometheus_client: {sample name: {labels tuple: value}}, and
    the families under the key "__families__" ({family name: type})."""
    text = httpx.get(url + "/metrics", timeout=30).text
    samples: dict[str, dict[tuple, float]] = {}
    families: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for sample in family.samples:
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "engine"))
            samples.setdefault(sample.name, {})[key] = sample.value
    return {"__families__": families, **samples}


def total(page: dict[str, Any], name: str) -> float:
    return sum(page.get(name, {}).values())
