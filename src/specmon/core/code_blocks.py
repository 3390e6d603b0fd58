"""The fenced code blocks of a Markdown answer (``` or ~~~, as CommonMark fences them), for the
chat screen's copy-a-code-block key. Pure."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def code_blocks(markdown: str) -> list[str]:
    """The contents of each fenced code block, in order, without the fences (an unclosed fence
    runs to the end of the text, as a Markdown renderer shows it). A backtick fence whose info
    string holds a backtick is not a fence."""
    blocks: list[str] = []
    fence: str | None = None
    lines: list[str] = []
    for line in markdown.splitlines():
        if fence is None:
            m = _FENCE.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence, lines = m.group(1), []
            continue
        stripped = line.strip()
        if (
            len(line) - len(line.lstrip(" ")) <= 3
            and stripped
            and set(stripped) == {fence[0]}
            and len(stripped) >= len(fence)
        ):
            blocks.append("\n".join(lines))
            fence = None
            continue
        lines.append(line)
    if fence is not None:
        blocks.append("\n".join(lines))
    return blocks
