"""Untrusted text made visible: control characters (escape sequences) and bidi controls replaced
by visible stand-ins. One rule for every place specmon shows or writes text it did not write
(model output, server messages, logs, saved conversations): the app's widgets (through
ui/formatting.py) and the Markdown export of a saved chat (core/conversation_export.py)."""

from __future__ import annotations

import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The bidi controls (they reorder what follows them on screen)."""
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def _stand_in(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every control character (except newline and tab) replaced by a visible sign.
    C0 codes become their Unicode "control picture" (ESC -> U+241B), DEL U+2421, C1 codes and
    bidi controls `<U+XXXX>`. Markup is not touched here: the widgets show Text objects, never
    markup."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_stand_in, text)
