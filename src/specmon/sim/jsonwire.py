"""JSON as vLLM's server writes it: compact separators, UTF-8 kept as is (pydantic's
`model_dump_json`). Every body and SSE message of the simulator goes through `dumps`."""

from __future__ import annotations

import json
from typing import Any

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

JsonObject = dict[str, Any]
"""A decoded JSON object (request bodies, response objects)."""


def dumps(obj: Any) -> str:
    """Compact JSON, UTF-8 kept as is (like pydantic's model_dump_json)."""
    return _dumps(obj)
