"""Untrusted text (model output, server messages) made safe to show literally.

Control characters would act on the terminal (an ESC starts an escape sequence that can clear the
screen, set the window title or write the clipboard; a CR rewinds the line) and bidirectional
controls reorder what is shown. Every such character is replaced by a visible stand-in: C0 codes by
their Unicode "control picture" (ESC -> U+241B), DEL by U+2421, C1 codes and bidi controls by
`<U+XXXX>`. Newline and tab are kept. Markup (`[bold]`, `[@click=...]`) is not touched here: the
widgets never parse it, they show `Text`/`Content` objects, never markup strings.
"""

from __future__ import annotations

import re

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
    """`text` with every control character (except newline and tab) replaced by a visible sign."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_stand_in, text)
