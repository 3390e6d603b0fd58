"""Split a growing Markdown text into settled top-level blocks and a growing tail.

A streamed answer only ever changes at its end, and in Markdown only the last top-level block can
still change its meaning (an open code fence, a paragraph that is still being written). The
splitter scans each completed line once and settles the text up to the last block boundary outside
a code fence: a blank line, or the closing line of a fence. Settled text is parsed and laid out once
by the UI; only the tail after it is redrawn as the answer grows. The final answer is rendered whole
once at the end, so any block the boundary rule cut differently (a loose list) is put right then.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


FENCE_LINES = 8
"""Inside a code fence, whole lines settle every this many lines (a long code block must not stay
in the redrawn tail)."""
RUN_LINES = 24
"""Outside a fence, a run of this many lines without a blank line settles at a line boundary."""


class BlockSplitter:
    """Feed text as it arrives; `feed()` returns the newly settled segment ("" when none).

    Settling happens at a blank line or a closing fence; also, so the tail stays short, after
    every `fence_lines` lines inside a code fence and every `run_lines` lines of a run without
    a blank line (a long paragraph or list). A segment that starts or ends inside a fence is
    described by `settled_fence` (the opening line) and `settled_fence_marker`, read before and
    after `feed()`. Each decision depends on the completed lines only, never on how the text
    was chunked.
    """

    def __init__(self, fence_lines: int = FENCE_LINES, run_lines: int = RUN_LINES) -> None:
        self._fence_lines = fence_lines
        self._run_lines = run_lines
        self._lines_since = 0
        """Complete lines scanned since the last boundary."""
        self._fence_line: str | None = None
        """The opening line of the fence we are inside (while `_fence` is set)."""
        self._mid_block = False
        """The settled prefix ends inside a block (split by the line-count rules)."""
        self._settled_fence: tuple[str, str] | None = None
        """(opening line, marker) of the fence the settled prefix ends inside, else None."""
        self._parts: list[str] = []
        self._text = ""
        self._scanned = 0
        """Offset of the first character of the first line not yet scanned."""
        self._settled = 0
        self._fence: str | None = None
        """The opening fence's marker (e.g. "```") while inside a fenced code block."""

    @property
    def text(self) -> str:
        """Everything fed so far."""
        self._join()
        return self._text

    @property
    def settled(self) -> int:
        """Length of the settled prefix of `text`."""
        return self._settled

    @property
    def settled_fence(self) -> str | None:
        """The opening line of the code fence the settled prefix ends inside (None: outside)."""
        return None if self._settled_fence is None else self._settled_fence[0]

    @property
    def settled_fence_marker(self) -> str | None:
        """The marker that would close the fence the settled prefix ends inside (None: outside)."""
        return None if self._settled_fence is None else self._settled_fence[1]

    @property
    def settled_mid_block(self) -> bool:
        """True when the settled prefix ends inside a block (a fence or a run of lines split by
        the line-count rules): the next segment continues that block."""
        return self._mid_block

    @property
    def tail(self) -> str:
        """The unsettled end of the text (what may still change)."""
        self._join()
        return self._text[self._settled :]

    def _join(self) -> None:
        if self._parts:
            self._text += "".join(self._parts)
            self._parts.clear()

    def feed(self, fragment: str) -> str:
        """Add `fragment`; return the text that became settled because of it ("" if none)."""
        if not fragment:
            return ""
        self._parts.append(fragment)
        if "\n" not in fragment:
            return ""
        self._join()
        text = self._text
        boundary = -1
        boundary_fence = self._settled_fence
        mid_block = self._mid_block
        pos = self._scanned
        while True:
            end = text.find("\n", pos)
            if end < 0:
                break
            line = text[pos:end]
            after = end + 1
            self._lines_since += 1
            if self._fence is not None:
                stripped = line.strip()
                marker = self._fence
                if (
                    stripped.startswith(marker[0] * len(marker))
                    and set(stripped) == {marker[0]}
                    and len(line) - len(line.lstrip(" ")) <= 3
                ):
                    self._fence = self._fence_line = None
                    boundary, boundary_fence, mid_block = after, None, False
                elif self._lines_since >= self._fence_lines:
                    assert self._fence_line is not None
                    boundary, boundary_fence = after, (self._fence_line, self._fence)
                    mid_block = True
            else:
                match = _FENCE.match(line)
                if match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                    self._fence = match.group(1)
                    self._fence_line = line
                elif not line.strip():
                    boundary, boundary_fence, mid_block = after, None, False
                elif self._lines_since >= self._run_lines:
                    boundary, boundary_fence, mid_block = after, None, True
            if boundary == after:
                self._lines_since = 0
            pos = after
        self._scanned = pos
        if boundary <= self._settled:
            return ""
        segment = text[self._settled : boundary]
        self._settled = boundary
        self._settled_fence = boundary_fence
        self._mid_block = mid_block
        return segment


def top_level_starts(text: str) -> set[int]:
    """Offsets in `text` where a top-level Markdown block starts (as Rich's parser sees it),
    plus len(text). Used at the end of an answer: streamed blocks whose start and end are both
    top-level starts render the same alone as in the whole text, so only the rest is re-laid."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt().enable("strikethrough").enable("table").parse(text)
    line_starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            line_starts.append(i + 1)
    starts = {len(text)}
    for token in tokens:
        if token.level == 0 and token.map is not None and token.nesting >= 0:
            line = token.map[0]
            if line < len(line_starts):
                starts.add(line_starts[line])
    return starts


def skip_blank_lines(text: str, offset: int) -> int:
    """`offset` moved past any blank lines that start there (to where a block can start)."""
    while offset < len(text):
        end = text.find("\n", offset)
        if end < 0 or text[offset:end].strip():
            return offset
        offset = end + 1
    return len(text)
