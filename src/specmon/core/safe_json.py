"""JSON from untrusted text with bounds: size and nesting depth checked, one error type.

`json.loads` on hostile text fails in ways a caller rarely catches: a RecursionError for arrays
nested thousands deep (not a ValueError), a MemoryError for a huge document. `loads_bounded`
refuses text longer than `max_chars` and nesting deeper than `max_depth` before parsing, and turns
every failure into `JsonError` (a ValueError) whose str() says what was wrong in a few words,
fit to follow "FILE:LINE: " or a URL in a one-line message.

Depth is measured on the text itself (brackets outside strings), so the bound does not depend on
how deep the caller's stack already is. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_MAX_DEPTH = 64
"""Nesting levels allowed by default: specmon's own JSON (recordings, results, dataset lines,
server answers) nests fewer than ten."""

_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
"""An escape pair (a quote after a backslash does not end a string), a quote or a bracket: one
linear pass over the text."""


class JsonError(ValueError):
    """Text that is not JSON, or is beyond the bounds; str() says which in a few words."""


def depth_of(text: str, limit: int) -> int:
    """The deepest bracket nesting in `text` (strings skipped), counted up to `limit` + 1."""
    if text.count("[") + text.count("{") <= limit:
        return min(limit, text.count("[") + text.count("{"))  # cannot nest deeper than that
    depth = deepest = 0
    in_string = False
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token == '"':
            in_string = not in_string
        elif in_string or len(token) == 2:
            continue
        elif token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def loads_bounded(
    text: str | bytes,
    *,
    max_chars: int | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """`json.loads(text)` within the bounds, else JsonError (see the module docstring). Bytes
    must be UTF-8."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonError("not UTF-8 text") from None
    if max_chars is not None and len(text) > max_chars:
        raise JsonError(f"JSON text longer than {max_chars:,} characters")
    if depth_of(text, max_depth) > max_depth:
        raise JsonError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError:  # an integer longer than Python converts (4,300 digits by default)
        raise JsonError("a number in the JSON has too many digits to read") from None
    except (RecursionError, MemoryError) as exc:  # a bound the checks above did not foresee
        raise JsonError(f"JSON too large or deep to read ({type(exc).__name__})") from None
