"""Acceptance heat: an answer's text split into engine steps, each classed by how many drafts it
accepted, so a screen can colour where the drafter keeps up and where it fails.

Two ways to find the steps, best first:
1. **server** (exact): vLLM's per-request `per_step_accepted` array (`detailed` per-request
   metrics, kept on the row as `RequestRow.spec_steps`). Token 0 is the prefill token; then step j
   produced `accepted[j] + 1` tokens. Tokens are placed in the text through a `TokenMap`: exact per
   token when the caller knows each token's end offset, else at the chunk boundaries the stream
   gave (cumulative `completion_tokens` per chunk) with the tokens inside a chunk spread evenly
   over its text (such a span says `exact=False`). A step array shorter than the answer (the row
   keeps the first 2,048 steps) leaves the rest "unknown"; a last step cut by max_tokens or the
   stop token is clipped to the answer.
2. **chunks** (client side): one stream chunk = one step while the reader keeps up, with
   tokens = the chunk's cumulative count minus the previous one's. The first token-carrying chunk
   is the prefill. A chunk with more than K + 1 tokens merged several steps (the reader fell
   behind): "unknown". So is a chunk whose count is missing or shrinks (and the next counted
   chunk, whose difference then covers both), a multi-token chunk when K is unknown (a merge
   cannot be told from one step), and the chunk carrying the finish reason unless even its lower
   bound is "many" (its step was cut: it accepted at least the tokens shown, maybe more).

Classes (`heat_class`), by the drafts a step accepted (a = tokens - 1):
- "single": a = 0, one token per step, vanilla-like;
- "some": 1 ≤ a < the "many" bar;
- "many": a ≥ max(1, ceil(K * MANY_SHARE)) (half of K, rounded up), or a ≥ MANY_WITHOUT_K when K is
  unknown;
- "unknown": not measurable (see above); "prefill": the first token, produced by the prefill pass,
  not a decode step.

Text offsets are indices into the concatenation of the pieces' texts (Python str indices). Pure:
no I/O; model text is never interpreted, only measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from specmon.core.events import StreamChunk
from specmon.core.views import RequestRow

HeatClass = Literal["many", "some", "single", "unknown", "prefill"]
HeatSource = Literal["server", "chunks"]

HEAT_CLASSES: tuple[HeatClass, ...] = ("many", "some", "single", "unknown", "prefill")

MANY_SHARE = 0.5
"""A step accepted "many" drafts when it accepted at least this share of K (rounded up)."""

MANY_WITHOUT_K = 3
"""The "many" bar when K (n_spec) is unknown."""


def many_bar(n_spec: int | None) -> int:
    """The fewest accepted drafts that make a step "many"."""
    if n_spec is None or n_spec < 1:
        return MANY_WITHOUT_K
    return max(1, math.ceil(n_spec * MANY_SHARE))


def heat_class(accepted: int, n_spec: int | None) -> HeatClass:
    """The class of a step that accepted `accepted` drafts (see the module docstring)."""
    if accepted <= 0:
        return "single"
    if accepted >= many_bar(n_spec):
        return "many"
    return "some"


@dataclass(frozen=True, slots=True)
class TextPiece:
    """The text one stream chunk added, with the CUMULATIVE completion tokens after it (None when
    the chunk had no usage numbers) and whether it carried the finish reason."""

    text: str
    completion_tokens: int | None
    final: bool = False


def pieces_from_chunks(
    chunks: Iterable[StreamChunk], *, include_reasoning: bool = False
) -> tuple[TextPiece, ...]:
    """The pieces of one request's chunks (in arrival order). With `include_reasoning`, each
    piece's text is its reasoning followed by its content (as a screen showing both would lay
    them out); otherwise the content only (token counts still cover both)."""
    out: list[TextPiece] = []
    for c in chunks:
        text = (c.reasoning + c.text) if include_reasoning else c.text
        out.append(TextPiece(text, c.completion_tokens, c.finish_reason is not None))
    return tuple(out)


class TokenMap:
    """Where token boundaries fall in the text: known points (tokens so far, text offset),
    exact at those points and spread evenly between them."""

    def __init__(self, points: Sequence[tuple[int, int]], text_length: int) -> None:
        clean: list[tuple[int, int]] = [(0, 0)]
        for tokens, offset in sorted(points):
            last_t, last_o = clean[-1]
            if tokens < last_t or offset < last_o or offset > text_length:
                continue  # not monotone: not a point to trust
            if tokens == last_t:
                clean[-1] = (tokens, max(offset, last_o)) if tokens else clean[-1]
                continue
            clean.append((tokens, offset))
        self._points = clean
        self._exact = {t: o for t, o in clean}
        self.text_length = text_length

    @classmethod
    def from_pieces(cls, pieces: Sequence[TextPiece]) -> TokenMap:
        points: list[tuple[int, int]] = []
        offset = 0
        last: int | None = 0
        for p in pieces:
            offset += len(p.text)
            cum = p.completion_tokens
            if cum is None or (last is not None and cum < last):
                continue
            points.append((cum, offset))
            last = cum
        return cls(points, offset)

    @classmethod
    def from_token_ends(cls, token_ends: Sequence[int], text_length: int) -> TokenMap:
        """From the end offset of every token (token i ends at `token_ends[i]`)."""
        return cls([(i + 1, end) for i, end in enumerate(token_ends)], text_length)

    @property
    def known_tokens(self) -> int:
        """The last token count with a known offset."""
        return self._points[-1][0]

    def offset(self, tokens: int) -> tuple[int, bool]:
        """The text offset after `tokens` tokens, and whether it is exact."""
        exact = self._exact.get(tokens)
        if exact is not None:
            return exact, True
        pts = self._points
        if tokens >= pts[-1][0]:
            return self.text_length, False
        lo = 0
        hi = len(pts) - 1
        while hi - lo > 1:  # pts[lo][0] < tokens < pts[hi][0]
            mid = (lo + hi) // 2
            if pts[mid][0] < tokens:
                lo = mid
            else:
                hi = mid
        (t0, o0), (t1, o1) = pts[lo], pts[hi]
        return o0 + round((o1 - o0) * (tokens - t0) / (t1 - t0)), False


@dataclass(frozen=True, slots=True)
class HeatSpan:
    """One step (or one chunk that cannot be split) of an answer."""

    start: int
    end: int
    """Text offsets [start, end) in the answer's text."""
    heat: HeatClass
    first_token: int | None
    tokens: int | None
    """Token range [first_token, first_token + tokens); None when not known."""
    accepted: int | None
    """Drafts this step accepted (None: unknown, prefill, or several steps)."""
    exact: bool
    """Both text boundaries are known exactly (False: spread over a chunk's text, or unknown)."""


@dataclass(frozen=True, slots=True)
class AnswerHeat:
    """An answer's heat: its spans in text order, and where the steps came from."""

    source: HeatSource
    n_spec: int | None
    spans: tuple[HeatSpan, ...]

    def tokens_by_heat(self) -> dict[HeatClass, int]:
        """Tokens of each class (spans of unknown size left out)."""
        out: dict[HeatClass, int] = dict.fromkeys(HEAT_CLASSES, 0)
        for s in self.spans:
            if s.tokens is not None:
                out[s.heat] += s.tokens
        return out


def heat_from_steps(
    accepted: Sequence[int] | bytes,
    token_map: TokenMap,
    *,
    n_spec: int | None,
    completion_tokens: int | None = None,
) -> AnswerHeat:
    """Exact heat from the server's per-step accepted counts (step j made accepted[j] + 1
    tokens after the prefill token). `completion_tokens` (default: the map's last known count)
    bounds the answer: a last step past it is clipped, tokens past the steps are "unknown"."""
    n = completion_tokens if completion_tokens is not None else token_map.known_tokens
    spans: list[HeatSpan] = []

    def add(first: int, count: int, heat: HeatClass, acc: int | None) -> None:
        start, exact_start = token_map.offset(first)
        end, exact_end = token_map.offset(first + count)
        spans.append(HeatSpan(start, end, heat, first, count, acc, exact_start and exact_end))

    if n <= 0:
        return AnswerHeat("server", n_spec, ())
    add(0, 1, "prefill", None)
    tok = 1
    for a in accepted:
        if tok >= n:
            break
        count = min(a + 1, n - tok)
        add(tok, count, heat_class(a, n_spec), a)
        tok += count
    if tok < n:
        add(tok, n - tok, "unknown", None)
    return AnswerHeat("server", n_spec, tuple(spans))


def heat_from_chunks(pieces: Sequence[TextPiece], *, n_spec: int | None) -> AnswerHeat:
    """Heat from stream chunks and their token counts (see the module docstring)."""
    spans: list[HeatSpan] = []
    offset = 0
    prev = 0
    seen_first = False
    after_unknown = False
    limit = n_spec + 1 if n_spec is not None and n_spec >= 0 else None
    for p in pieces:
        start, offset = offset, offset + len(p.text)
        cum = p.completion_tokens
        if cum is None or cum < prev:
            after_unknown = True
            if start != offset:
                spans.append(HeatSpan(start, offset, "unknown", None, None, None, False))
            continue
        d = cum - prev
        first = prev
        prev = cum
        if d == 0:
            if start != offset:  # text without tokens: cannot be placed in a step
                spans.append(HeatSpan(start, offset, "unknown", first, 0, None, False))
            continue
        heat: HeatClass
        acc: int | None = None
        if after_unknown:
            after_unknown = False
            seen_first = True
            spans.append(HeatSpan(start, offset, "unknown", None, None, None, False))
            continue
        if not seen_first:
            seen_first = True
            # One token: the prefill step's. More: the prefill merged with decode steps.
            heat = "prefill" if d == 1 else "unknown"
        elif limit is not None and d > limit:
            heat = "unknown"  # merged: several steps in one chunk
        elif p.final:
            # Cut by the stop condition: the step accepted at least d - 1 drafts.
            heat = "many" if d - 1 >= many_bar(n_spec) else "unknown"
        elif limit is None and d > 1:
            heat = "unknown"  # without K a merge cannot be told from one step
        else:
            acc = d - 1
            heat = heat_class(acc, n_spec)
        spans.append(HeatSpan(start, offset, heat, first, d, acc, heat != "unknown"))
    return AnswerHeat("chunks", n_spec, tuple(spans))


def answer_heat(
    pieces: Sequence[TextPiece],
    *,
    n_spec: int | None,
    row: RequestRow | None = None,
    token_ends: Sequence[int] | None = None,
) -> AnswerHeat:
    """The best heat for an answer: from the row's server step array when it has one (placed
    with `token_ends` when the caller knows each token's end offset, else at the chunk
    boundaries), else from the chunks."""
    steps = row.spec_steps if row is not None else None
    if steps is not None and steps.kept > 0:
        text_length = sum(len(p.text) for p in pieces)
        token_map = (
            TokenMap.from_token_ends(token_ends, text_length)
            if token_ends is not None
            else TokenMap.from_pieces(pieces)
        )
        total = row.completion_tokens if row is not None else None
        return heat_from_steps(steps.accepted, token_map, n_spec=n_spec, completion_tokens=total)
    return heat_from_chunks(pieces, n_spec=n_spec)


def coalesce(spans: Sequence[HeatSpan]) -> tuple[tuple[int, int, HeatClass], ...]:
    """Adjacent spans of one class joined, as (start, end, class) runs of text (for painting);
    empty spans dropped."""
    runs: list[tuple[int, int, HeatClass]] = []
    for s in spans:
        if s.end <= s.start:
            continue
        if runs and runs[-1][2] == s.heat and runs[-1][1] == s.start:
            runs[-1] = (runs[-1][0], s.end, s.heat)
        else:
            runs.append((s.start, s.end, s.heat))
    return tuple(runs)
