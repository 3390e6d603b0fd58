"""The one home of the small number rules: what counts as a number when it comes from outside
(a JSON value, a field of a log line, an NVML reading), and the rule that no NaN or infinity
reaches a view or a JSON output.

Every function here is lenient: a value that is not a usable number gives None, never an
exception (untrusted input never raises). Readers that must refuse a bad value with their own
one-line error (a recording, a command-line option, a `--faults` item) check the None.
"""

from __future__ import annotations

import math
from typing import Any


def finite(x: float | None) -> float | None:
    """`x` as a float, or None for missing or non-finite numbers (no NaN or infinity reaches a
    view)."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def as_float(value: object) -> float | None:
    """A finite float from a number value (an int or a float; a bool is not a number), else
    None: a string, None, NaN, ±infinity, an int too large for a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def as_int(value: object) -> int | None:
    """An int from a whole-number value (an int, or a finite float with no fraction; a bool is
    not a number), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def parse_float(text: str | None) -> float | None:
    """A finite float from text ("1.5", "2e3"), else None: not a number, "nan", "inf", or
    digits beyond a float's range."""
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_int(text: str | None) -> int | None:
    """An int from text ("42", "-3"), else None: not a whole number, or more digits than
    Python's int() converts (untrusted text never raises)."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def finite_json(value: Any) -> Any:
    """`value` (JSON data) with every non-finite float (NaN, ±Infinity), at any depth of dicts,
    lists and tuples, as None: what strict JSON (`allow_nan=False`) can carry; tuples become
    lists."""
    if isinstance(value, float):
        return finite(value)
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value
