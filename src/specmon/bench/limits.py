"""The ranges a number read back from a file must be in: bench results (`--json`, a sweep's
`runs/*.json`) and a sweep's `sweep.json`. Such files are shared, so what they hold is untrusted:
a value outside its range (or not a finite number) is refused with one line naming the field,
never passed on to the tables, charts and files made from it (a 1e308 tok/s once overflowed the
bar chart; a num_speculative_tokens of 99999 reached vLLM's config). docs/bad-input.md lists
the limits.

Pure: no I/O. `check_number` returns the value or raises LimitError (a ValueError) whose str()
is "FIELD VALUE is ..." ready to follow "FILE: ".
"""

from __future__ import annotations

import math

from specmon.core.display_text import fit, shorten

MAX_N_SPEC = 64
"""The largest num_speculative_tokens a sweep measures (`--n-spec`, `--point N=`, the k of an
emitted per-batch-size schedule)."""

MAX_RESULT_N_SPEC = 256
"""The largest n_spec a bench result may report for its server (the recordings' limit,
core.recording_format.MAX_N_SPEC): also the longest per-position acceptance list."""

MAX_TOK_S = 10_000_000.0
"""Tokens (or requests) per second: far above any one server."""

MAX_MS = 1e9
"""A latency in milliseconds (about 11.6 days)."""

MAX_SECONDS = 1e7
"""A duration or send time in seconds (about 116 days)."""

MAX_COUNT = 10**12
"""Requests, tokens, samples, chunks, draft counts."""

MAX_ANY = 1e15
"""Any other number: at least finite and of a sane size."""


class LimitError(ValueError):
    """A number outside its range; str() is "FIELD VALUE is ...", one line."""


def number_text(value: float | int) -> str:
    """A limit or a read number, short: 64, 10,000,000, 1e+308, nan; an integer too long to
    write in 15 characters as "a N-digit integer" (never 300 digits)."""
    if isinstance(value, int):
        if abs(value) < 10**15:
            return f"{value:,}"
        return f"a {int(value.bit_length() * math.log10(2)) + 1}-digit integer"
    if not math.isfinite(value):
        return repr(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return fit(value, "g", 12)


def shown(value: object) -> str:
    """A read value as the error shows it: a number short (number_text), else its repr cut to
    40 characters."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number_text(value)
    text = repr(value)
    return shorten(text, 40)


def check_number(
    value: object,
    field: str,
    lo: float,
    hi: float,
    *,
    integer: bool = False,
    optional: bool = True,
    unit: str = "",
) -> float | int | None:
    """`value` when it is a finite number (an integer when `integer`) in lo..hi, or None when
    `optional` and missing; LimitError otherwise."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "an integer" if integer else "a number"
        raise LimitError(f"{field} {shown(value)} is not {kind}")
    if integer and not isinstance(value, int):
        raise LimitError(f"{field} {shown(value)} is not an integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise LimitError(f"{field} {shown(value)} is not a finite number")
    if not lo <= value <= hi:
        suffix = f" {unit}" if unit else ""
        raise LimitError(
            f"{field} {shown(value)} is out of range ({number_text(lo)} to {number_text(hi)}"
            f"{suffix})"
        )
    return value


def check_int(value: object, field: str, lo: int, hi: int) -> int:
    """`value` when it is an integer in lo..hi (not missing); LimitError otherwise."""
    check_number(value, field, lo, hi, integer=True, optional=False)
    assert isinstance(value, int)
    return value
