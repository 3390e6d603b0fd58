"""How numbers and untrusted text are written as plain text: the rules every renderer shares
(the Textual app and `watch --once`'s Rich text through ui.formatting, bench's reports, exports).

Every number has a field width (`fit`): a value too wide for it is written as out of range
(">1e6", "<-1e5"), never as 309 digits, and an infinite one likewise (no "inf"); a missing one is
— (never 0). Untrusted text (model output, server messages, logs) is made safe by `visible`
(control characters shown as visible signs) or `clean` (removed, one line). Text too long for
its place is cut by one rule, `shorten`: it ends in "…" (never a silently cut word), measured in
terminal cells, the same rule as Rich's and Textual's `overflow="ellipsis"`.

Plain strings only: no Rich, no Textual, no I/O.
"""

from __future__ import annotations

import re

from wcwidth import wcwidth

DASH = "—"
"""What a missing number is shown as (never 0)."""

GIB = 1024**3


_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")


def _stand_in(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every control character (except newline and tab) replaced by a visible sign:
    what the app shows of untrusted text (model output, server messages, logs). C0 codes become
    their Unicode "control picture" (ESC -> U+241B), DEL U+2421, C1 codes and bidi controls
    `<U+XXXX>`. Markup is not touched here: the widgets show Text objects, never markup."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_stand_in, text)


def visible_line(text: str | None) -> str:
    """Untrusted text on one line (model names, errors): runs of whitespace folded to one
    space, control characters made visible; — when missing."""
    return visible(" ".join((text or DASH).split()))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"[\t\n]+")


def clean(text: str, *, multiline: bool = False) -> str:
    """Text safe to print where nothing can stand in for a character (the Rich console, plain
    lines, files): control characters (escape sequences, bidi overrides) removed, and,
    unless `multiline`, tabs and newlines turned into spaces so one field stays one line (a
    server's error text cannot forge lines of its own in the output)."""
    text = _CONTROL.sub("", text)
    return text if multiline else _LINE_BREAKS.sub(" ", text)


ELLIPSIS = "…"
"""What ends every cut text (`shorten`)."""


def cell_width(text: str) -> int:
    """The terminal cells `text` takes (a CJK character takes two, a combining mark none, a
    control character one: the app shows it as a visible sign)."""
    return sum(max(wcwidth(c), 0) if c.isprintable() else 1 for c in text)


def shorten(text: str, width: int, *, keep_end: str = "") -> str:
    """`text` in at most `width` terminal cells: whole when it fits, else cut and ended with
    "…" (the one truncation rule of every screen; Rich and Textual cut the same way with
    `overflow="ellipsis"` / `text-overflow: ellipsis`). `keep_end`, a suffix of `text` (a
    server's port), is kept after the "…" when the cut text still has a character before it."""
    if cell_width(text) <= width:
        return text
    if width <= 0:
        return ""
    if keep_end and text.endswith(keep_end):
        room = width - 1 - cell_width(keep_end)
        head = shorten(text[: len(text) - len(keep_end)], room + 1) if room >= 1 else ""
        if head.endswith(ELLIPSIS) and len(head) > 1:
            return head + keep_end
    out: list[str] = []
    used = 0
    for c in text:
        w = max(wcwidth(c), 0) if c.isprintable() else 1
        if used + w > width - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + ELLIPSIS


MAX_NUMBER_CHARS = 15
"""Widest number any field shows ("999,999,999,999"); wider ones are written as out of range."""


def _bound(spec: str, width: int, unit: str, negative: bool) -> int:
    """The smallest power of ten whose text in `spec` (with the sign and unit) is wider than
    `width`: every value written in `width` characters is below 10 ** that."""
    for digits in range(1, 400):
        try:
            text = format((-1.0 if negative else 1.0) * 10.0**digits, spec) + unit
        except OverflowError:
            return digits
        if len(text) > width:
            return digits
    return 400


def out_of_range(value: float, spec: str, width: int, unit: str = "") -> str:
    """What a number too wide for its field shows: ">1e6" (above the widest value the field
    holds), "<-1e5" below, or "<0" where even that does not fit; never wider than the field
    once the field has 4 characters."""
    if value > 0:
        return f">1e{_bound(spec, width, unit, negative=False)}{unit}"[: max(width, 4)]
    marker = f"<-1e{_bound(spec, width, unit, negative=True)}"
    for text in (marker + unit, marker):
        if len(text) <= width:
            return text
    return "<0"


def fit(value: float | int | None, spec: str, width: int, unit: str = "") -> str:
    """A number formatted in at most `width` characters: — when missing (never 0 for missing),
    the number when it fits, else `out_of_range` (an infinite value is out of range; NaN is
    not a number and shows —). A 309-digit gauge never spreads a row over several lines."""
    if value is None or isinstance(value, bool):
        return DASH
    if isinstance(value, float) and value != value:
        return DASH
    try:
        text = f"{value:{spec}}{unit}"
    except (TypeError, ValueError):
        return DASH
    if len(text) <= width and text.lower().lstrip("-") not in ("inf", "inf" + unit.lower()):
        return text
    return out_of_range(float(value), spec, width, unit)


def fmt_field(value: float | int | None, spec: str, width: int = 0) -> str:
    """A number right-aligned in a fixed field of `width` characters (`fit`; — when missing),
    so a column never moves; without a width, as wide as it is (`fmt`)."""
    if not width:
        return fmt(value, spec)
    return fit(value, spec, width).rjust(width)


def fmt(
    value: float | int | None, spec: str = ".1f", unit: str = "", width: int = MAX_NUMBER_CHARS
) -> str:
    """A number formatted, or — when missing (never 0 for missing); out of range past `width`
    characters (`fit`)."""
    return fit(value, spec, width, unit)


def fmt_tok_s(value: float | None) -> str:
    """Tokens per second, one decimal (out of range from 10 million)."""
    return fit(value, ".1f", 9)


def fmt_al(value: float | None) -> str:
    """An acceptance length, two decimals (out of range from 10,000)."""
    return fit(value, ".2f", 7)


def fmt_seconds(value: float | None) -> str:
    """Seconds with millisecond resolution (TTFT, ITL; out of range from a million)."""
    return fit(value, ".3f", 10)


def fmt_frac_pct(value: float | None) -> str:
    """A 0..1 fraction as a whole percentage ("45%"; out of range from 100,000%)."""
    return fit(value * 100 if value is not None else None, ".0f", 6, "%")


def fmt_rates(rates: tuple[float, ...] | None, limit: int = 8) -> str:
    """Per-position rates, two decimals each, the first `limit` positions (each out of range
    from 100)."""
    return " ".join(fit(r, ".2f", 5) for r in rates[:limit]) if rates else DASH


def fmt_gib(value: int | None) -> str:
    return fmt(value / GIB if value is not None else None, width=9)


def fmt_count(value: float | int | None) -> str:
    """A token or draft count, whole, with thousands separators (out of range from 10**15)."""
    return fit(value, ",.0f", 19)
