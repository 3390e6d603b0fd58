"""Shapes to compare a simulated server with a real vLLM: what must match, not the values.

Used on the golden captures (tests/golden/) and side by side with a live real server. Each
function reduces one artefact (a /metrics page, an SSE body, an HTTP exchange, a log line) to its
shape: names, types, label names, bucket edges, key structures, status codes, line templates.
"""

from __future__ import annotations

import itertools
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


# ------------------------------------------------------------------ metrics.speculative_decoding

SPEC_KEYS = (
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "acceptance_histogram",
    "num_spec_steps",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_tokens",
)
"""vLLM's key order (RequestSpecDecodeMetrics.to_dict), then the detailed level's arrays."""
PER_STEP_KEYS = ("per_step_accepted", "per_step_drafted")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_spec_object(spec: Any, *, detailed: bool, streamed: bool) -> None:
    """Assert that `spec` is a `metrics.speculative_decoding` object as vLLM writes it: keys in
    order, types, and the invariants that tie its numbers together (reference §3.3).

    Streamed, vLLM drops null fields (the summary level has no per-step keys); in a whole
    response they are null. The per-step arrays exist only when some step was recorded.
    """
    assert isinstance(spec, dict), spec
    steps = spec.get("num_spec_steps")
    with_arrays = detailed and _is_int(steps) and steps > 0
    expected = list(SPEC_KEYS) + (list(PER_STEP_KEYS) if with_arrays or not streamed else [])
    assert list(spec) == expected, f"keys {list(spec)} != {expected}"
    for key in ("mean_acceptance_length", "draft_acceptance_rate"):
        assert isinstance(spec[key], float), (key, spec[key])
    for key in ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens"):
        assert _is_int(spec[key]) and spec[key] >= 0, (key, spec[key])
    k = spec["num_spec_tokens"]
    assert _is_int(k) and k > 0
    histogram = spec["acceptance_histogram"]
    assert isinstance(histogram, list) and len(histogram) == k + 1
    assert all(_is_int(h) and h >= 0 for h in histogram)
    accepted = spec["num_accepted_draft_tokens"]
    drafted = spec["num_draft_tokens"]
    assert sum(histogram) == steps
    assert sum(j * h for j, h in enumerate(histogram)) == accepted
    assert accepted <= drafted <= k * steps
    assert spec["mean_acceptance_length"] == (1.0 + accepted / steps if steps else 1.0)
    assert spec["draft_acceptance_rate"] == (accepted / drafted if drafted else 0.0)
    if with_arrays:
        per_step, per_drafted = spec["per_step_accepted"], spec["per_step_drafted"]
        assert len(per_step) == len(per_drafted) == steps
        assert all(
            _is_int(a) and _is_int(d) and 0 <= a <= d <= k
            for a, d in zip(per_step, per_drafted, strict=True)
        )
        assert [per_step.count(j) for j in range(k + 1)] == histogram
        assert sum(per_drafted) == drafted
    elif not streamed:
        assert spec["per_step_accepted"] is None and spec["per_step_drafted"] is None


def stream_spec_object(raw: str) -> Any:
    """The `metrics.speculative_decoding` of a stream, asserting that only its final usage chunk
    (the last before [DONE]) carries `metrics`; None when no chunk does."""
    chunks = [json.loads(m) for m in sse_messages(raw)[:-1]]
    carriers = [i for i, c in enumerate(chunks) if "metrics" in c]
    if not carriers:
        return None
    assert carriers == [len(chunks) - 1] and chunk_kind(chunks[-1]) == "usage", carriers
    return chunks[-1]["metrics"]["speculative_decoding"]


def stream_step_tokens(raw: str) -> list[int]:
    """Tokens of each chunk after the first token (the prefill's), in order, from the
    cumulative continuous usage stats."""
    chunks = [json.loads(m) for m in sse_messages(raw)[:-1]]
    counts = [
        c["usage"]["completion_tokens"] for c in chunks if c.get("choices") and c.get("usage")
    ]
    steps = [b - a for a, b in itertools.pairwise([0, *counts]) if b > a]  # chat: a role chunk of 0
    assert steps and steps[0] == 1, counts
    return steps[1:]


def check_steps_are_chunks(spec: dict[str, Any], step_tokens: list[int]) -> None:
    """Decode chunk j carried step j's `per_step_accepted[j] + 1` tokens; the last step alone
    may be cut short by max_tokens (vLLM counts its drafts whole)."""
    produced = [a + 1 for a in spec["per_step_accepted"]]
    assert len(step_tokens) == len(produced), (step_tokens, produced)
    assert step_tokens[:-1] == produced[:-1], (step_tokens, produced)
    assert 1 <= step_tokens[-1] <= produced[-1]


def check_chunks_are_runs_of_steps(spec: dict[str, Any], raw: str) -> None:
    """The looser form of `check_steps_are_chunks` for a live server under load: vLLM's API
    server merges the outputs of consecutive steps into one chunk when its reader falls behind
    the engine, so each chunk must end where a step ended (the prefill included), never inside
    one; the last step alone may be cut by max_tokens."""
    chunks = [json.loads(m) for m in sse_messages(raw)[:-1]]
    received = sorted(
        {c["usage"]["completion_tokens"] for c in chunks if c.get("choices") and c.get("usage")}
        - {0}
    )
    produced = list(itertools.accumulate((a + 1 for a in spec["per_step_accepted"]), initial=1))
    assert received and set(received[:-1]) <= set(produced[:-1]), (received, produced)
    assert produced[-2] < received[-1] <= produced[-1], (received, produced)
