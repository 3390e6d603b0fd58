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
_FENCE_START = re.compile(r" {0,3}(?:`{3}|~{3})")
"""A line that starts like this may open a code fence: it is never cut inside."""
_CUT_BEFORE = re.compile(r"[ \t]+([^\s#>*+=|~`_:<\[!\\\d-])")
"""A cut inside a line: after spaces, before a character that cannot start a block (so the next
piece starts as a paragraph, not a list, heading, quote, fence or table)."""
_TICKS = re.compile(r"`+")


FENCE_LINES = 8
"""Inside a code fence, whole lines settle every this many lines (a long code block must not stay
in the redrawn tail)."""
RUN_LINES = 24
"""Outside a fence, a run of this many lines without a blank line settles at a line boundary."""
RUN_CHARS = 2000
"""Outside a fence, once this many characters are unsettled, a line settles inside itself: at the
last space before the limit (not inside an inline code span when there is a choice), or, with
none, at the line's start or the first space after it; a word longer than twice this (no space
at all) is cut where it reaches that. Never inside a line that may open a code fence."""


class BlockSplitter:
    """Feed text as it arrives; `feed()` returns the newly settled segment ("" when none).

    Settling happens at a blank line or a closing fence; also, so the tail stays short, after
    every `fence_lines` lines inside a code fence and every `run_lines` lines of a run without
    a blank line (a long paragraph or list). A segment that starts or ends inside a fence is
    described by `settled_fence` (the opening line) and `settled_fence_marker`, read before and
    after `feed()`. Each decision depends on the completed lines only, never on how the text
    was chunked.
    """

    def __init__(
        self,
        fence_lines: int = FENCE_LINES,
        run_lines: int = RUN_LINES,
        run_chars: int | None = None,
    ) -> None:
        """`run_chars` None: `RUN_CHARS` (read now); 0: lines are never cut inside."""
        self._fence_lines = fence_lines
        self._run_lines = run_lines
        self._run_chars = RUN_CHARS if run_chars is None else run_chars
        self._length = 0
        """Length of everything fed so far."""
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
        self._length += len(fragment)
        if "\n" not in fragment and (
            not self._run_chars or self._length - self._settled <= self._run_chars
        ):
            return ""
        self._join()
        text = self._text
        boundary = self._settled
        boundary_fence = self._settled_fence
        mid_block = self._mid_block
        pos = self._scanned
        while True:
            end = text.find("\n", pos)
            if self._run_chars and self._fence is None:
                cut = self._cut_inside(text, pos, len(text) if end < 0 else end, boundary)
                if cut > boundary:
                    boundary, boundary_fence, mid_block = cut, None, True
                    self._lines_since = 0
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

    def _cut_inside(self, text: str, start: int, end: int, settled: int) -> int:
        """The last cut in the line text[start:end] (outside a fence; `end` is its newline or,
        for the unfinished last line, the end of the text) so that no more than `run_chars`
        characters stay unsettled before it, `settled` when none is due. Each cut depends on
        the text up to it only, never on how the text was chunked."""
        limit = self._run_chars
        if end - settled <= limit:
            return settled
        may_fence = _FENCE_START.match(text, start) is not None
        while end - settled > limit:
            window_end = settled + limit
            first = max(start, settled)
            cut = -1
            if not may_fence and first < window_end:
                cut = _last_cut(text, first, window_end)
            if cut < 0 and start > settled:
                cut = start  # at the line's start, as a run of lines is cut
            if cut < 0:
                if may_fence:
                    return settled
                # No space within the limit: the first one after it, or a hard cut at twice it.
                match = _CUT_BEFORE.search(text, window_end, min(end, settled + 2 * limit))
                if match is not None:
                    cut = match.start(1)
                elif end - settled > 2 * limit:
                    cut = settled + 2 * limit
                else:
                    return settled
            settled = cut
        return settled


def _last_cut(text: str, start: int, end: int) -> int:
    """The last cut position in text[start:end] (the first character after spaces), preferring
    one outside an inline code span; -1 when there is none. A backtick run opens a span that
    the next run of the same length closes; one left open is taken to run to `end`."""
    cuts = [m.start(1) for m in _CUT_BEFORE.finditer(text, start, end + 1) if m.start(1) <= end]
    if not cuts:
        return -1
    spans: list[tuple[int, int]] = []
    opened: tuple[int, int] | None = None
    for tick in _TICKS.finditer(text, start, end):
        if opened is None:
            opened = (tick.start(), len(tick.group()))
        elif len(tick.group()) == opened[1]:
            spans.append((opened[0], tick.end()))
            opened = None
    if opened is not None:
        spans.append((opened[0], end + 1))
    for cut in reversed(cuts):
        if not any(a < cut < b for a, b in spans):
            return cut
    return cuts[-1]


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
