"""The small number rules, in their one home (`core/numbers.py`): a value from outside is a
number or None, never an exception, and no NaN or infinity gets through."""

from __future__ import annotations

import json
import math

import pytest

from specmon.core.numbers import as_float, as_int, finite, finite_json, parse_float, parse_int


def test_finite_drops_nan_and_infinity_and_gives_floats() -> None:
    assert finite(None) is None
    assert finite(math.nan) is None
    assert finite(-math.inf) is None
    assert finite(3) == 3.0 and isinstance(finite(3), float)
    assert finite(2.5) == 2.5


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (2.5, 2.5), (-0.0, 0.0), (True, None), ("1.5", None), (None, None),
     (math.nan, None), (math.inf, None), (10**400, None), ([1], None)],
)  # fmt: skip
def test_as_float_takes_numbers_only(value, expected) -> None:
    assert as_float(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (-2, -2), (4.0, 4), (4.5, None), (False, None), ("4", None), (math.inf, None),
     (math.nan, None), (None, None)],
)  # fmt: skip
def test_as_int_takes_whole_numbers_only(value, expected) -> None:
    assert as_int(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5", 1.5), ("2e3", 2000.0), (" 7 ", 7.0), ("nan", None), ("-inf", None),
     ("9" * 400, None), ("1,5", None), ("", None), (None, None)],
)  # fmt: skip
def test_parse_float_reads_finite_numbers(text, expected) -> None:
    assert parse_float(text) == expected


def test_parse_int_never_raises_on_untrusted_text() -> None:
    assert parse_int("42") == 42 and parse_int("-3") == -3
    assert parse_int("4.0") is None and parse_int("x") is None and parse_int(None) is None
    assert parse_int("9" * 5000) is None  # past int()'s digit limit: None, not ValueError


def test_finite_json_makes_strict_json_at_any_depth() -> None:
    data = {"a": math.nan, "b": [1.0, math.inf, {"c": (-math.inf, 2)}], "d": "nan", "e": None}
    out = finite_json(data)
    assert out == {"a": None, "b": [1.0, None, {"c": [None, 2]}], "d": "nan", "e": None}
    json.dumps(out, allow_nan=False)  # raises on any NaN or infinity left
