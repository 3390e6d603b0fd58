"""Shapes to compare a simulated server with a real vLLM: what must match, not the values.

Used on the golden captures (tests/golden/) and side by side with a live real server. Each
function reduces one artefact (a /metrics page, an SSE body, an HTTP exchange, a log line) to its
shape: names, types, label names, bucket edges, key structures, status codes, line templates.
"""

from __future__ import annotations

import json
import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from specmon.core import families

READ_FAMILIES: frozenset[str] = frozenset(
    {name.removesuffix("_total") for name in families.COUNTERS}
    | set(families.GAUGES)
    | set(families.HISTOGRAMS)
)
"""Family base names (as prometheus_client's parser names them) that specmon reads."""

MetricShape = dict[str, tuple[str, frozenset[str], tuple[float, ...] | None]]


def metric_shape(page: str) -> MetricShape:
    """{family: (type, label names, bucket edges or None)} for the families specmon reads."""
    out: MetricShape = {}
    for family in text_string_to_metric_families(page):
        if family.name not in READ_FAMILIES:
            continue
        labels: set[str] = set()
        buckets: set[float] = set()
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels.update(k for k in sample.labels if k != "le")
            if sample.name.endswith("_bucket"):
                buckets.add(float(sample.labels["le"]))
        edges = tuple(sorted(buckets)) if family.type == "histogram" else None
        out[family.name] = (family.type, frozenset(labels), edges)
    return out


def spec_families(page: str) -> set[str]:
    return {f.name for f in text_string_to_metric_families(page) if f.name.startswith("vllm:spec")}


def sse_messages(raw: str) -> list[str]:
    return [e[len("data: ") :] for e in raw.replace("\r\n", "\n").split("\n\n") if e.strip()]


def _keys(obj: Any) -> Any:
    """The key structure of a JSON value: dicts become sorted (key, structure) tuples."""
    if isinstance(obj, dict):
        return tuple(sorted((k, _keys(v)) for k, v in obj.items()))
    if isinstance(obj, list):
        return ("list", tuple(sorted({repr(_keys(v)) for v in obj})))
    return type(obj).__name__ if obj is not None else "null"


def chunk_kind(chunk: dict) -> str:
    if not chunk.get("choices"):
        return "usage"
    choice = chunk["choices"][0]
    if "role" in choice.get("delta", {}):
        return "role"
    if choice.get("finish_reason") is not None:
        return "final"
    return "content"


def sse_shape(raw: str) -> dict[str, set[Any]]:
    """{chunk kind: set of key structures}, with "[DONE]" as its own kind; plus order checks."""
    messages = sse_messages(raw)
    assert messages[-1] == "[DONE]", "a stream ends with data: [DONE]"
    shape: dict[str, set[Any]] = {"done": {"[DONE]"}}
    chunks = [json.loads(m) for m in messages[:-1]]
    for chunk in chunks:
        kind = chunk_kind(chunk)
        if kind == "content" and not chunk["choices"][0].get("delta", {}).get("content"):
            kind = "content-empty"
        shape.setdefault(kind, set()).add(_keys(chunk))
    return shape


def stream_facts(raw: str) -> dict[str, Any]:
    """Behaviour a stream must show, whatever the server: order of kinds, usage semantics."""
    messages = sse_messages(raw)
    chunks = [json.loads(m) for m in messages[:-1]]
    kinds = [chunk_kind(c) for c in chunks]
    usages = [c["usage"]["completion_tokens"] for c in chunks if c.get("usage")]
    return {
        "first_is_role": kinds[0] == "role",
        "role_delta": chunks[0]["choices"][0]["delta"] if kinds[0] == "role" else None,
        "usage_last_with_empty_choices": kinds[-1] == "usage",
        "finish_on_last_choice_chunk": [k for k in kinds if k != "usage"][-1] == "final",
        "usage_on_every_chunk": all("usage" in c for c in chunks),
        "usage_cumulative": usages == sorted(usages),
        "ends_with_done": messages[-1] == "[DONE]",
    }


def exchange_shape(status: int, content_type: str | None, body: str) -> dict[str, Any]:
    """Status, media type and the body's key structure (JSON) or emptiness."""
    media = (content_type or "").split(";")[0].strip() or None
    try:
        parsed = json.loads(body) if body else None
    except json.JSONDecodeError:
        parsed = body
    shape: dict[str, Any] = {"status": status, "media": media if body else None}
    if isinstance(parsed, dict) and "error" in parsed and isinstance(parsed["error"], dict):
        shape["keys"] = _keys(parsed)
        shape["error_type"] = parsed["error"].get("type")
        shape["error_code"] = parsed["error"].get("code")
    elif isinstance(parsed, dict) and set(parsed) == {"detail"}:
        shape["keys"] = _keys(parsed)
        shape["detail"] = parsed["detail"]
    else:
        shape["keys"] = _keys(parsed)
    return shape


_NUMBER = re.compile(r"\d+(?:\.\d+)?|nan")


def log_template(line: str) -> str | None:
    """A stats log line reduced to its template (numbers -> #, per-position list -> #…)."""
    for marker in ("Engine 000:", "SpecDecoding metrics:"):
        at = line.find(marker)
        if at >= 0:
            message = line[at:]
            if marker.startswith("Engine"):
                message = message.replace("Engine 000:", "Engine ENGINE:", 1)
            # the device word is the only non-numeric variable: "GPU KV cache usage" on a GPU,
            # "CPU KV cache usage" on the CPU build the captures come from
            message = re.sub(r"\b[CG]PU KV cache usage", "KV cache usage", message)
            template = _NUMBER.sub("#", message)
            return re.sub(r"#(?:, #)+", "#…", template).replace("Engine ENGINE:", "Engine 000:")
    return None
