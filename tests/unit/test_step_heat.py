"""Acceptance heat (core/step_heat.py): steps from the server's array or from chunks, classes,
merged chunks, the prefill token, missing data."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from specmon.core.events import StreamChunk
from specmon.core.step_heat import (
    MANY_WITHOUT_K,
    TextPiece,
    TokenMap,
    answer_heat,
    coalesce,
    heat_class,
    heat_from_chunks,
    heat_from_steps,
    many_bar,
    pieces_from_chunks,
)
from specmon.core.views import RequestRow, SpecSteps


def test_class_rule() -> None:
    assert many_bar(8) == 4 and many_bar(7) == 4 and many_bar(1) == 1 and many_bar(2) == 1
    assert many_bar(None) == MANY_WITHOUT_K
    assert [heat_class(a, 8) for a in (0, 1, 3, 4, 8)] == [
        "single",
        "some",
        "some",
        "many",
        "many",
    ]
    assert heat_class(1, 1) == "many"  # K = 1: accepting the one draft is all it can do
    assert heat_class(2, None) == "some" and heat_class(3, None) == "many"


def chunks_of(*parts: tuple[str, int | None], final_last: bool = True) -> list[TextPiece]:
    """Pieces from (text, cumulative tokens); a role chunk first, the finish reason last."""
    out = [TextPiece("", 0)]
    for i, (text, cum) in enumerate(parts):
        out.append(TextPiece(text, cum, final_last and i == len(parts) - 1))
    return out


def test_chunk_path_one_chunk_per_step() -> None:
    # prefill "A"; a 5-token step; a 1-token step; a 3-token step; final 1-token chunk (cut).
    pieces = chunks_of(("A", 1), ("bcdef", 6), ("g", 7), ("hij", 10), ("k", 11))
    heat = heat_from_chunks(pieces, n_spec=4)
    assert heat.source == "chunks"
    got = [(s.start, s.end, s.heat, s.tokens, s.accepted) for s in heat.spans]
    assert got == [
        (0, 1, "prefill", 1, None),
        (1, 6, "many", 5, 4),
        (6, 7, "single", 1, 0),
        (7, 10, "many", 3, 2),  # K = 4: the bar is 2 accepted
        (10, 11, "unknown", 1, None),  # cut by the stop condition: accepted at least 0
    ]
    assert heat.tokens_by_heat() == {"many": 8, "some": 0, "single": 1, "unknown": 1, "prefill": 1}


def test_chunk_path_merged_chunk_is_unknown() -> None:
    # K = 2: a chunk of 5 tokens is at least two steps merged by a slow reader.
    pieces = chunks_of(("A", 1), ("bc", 3), ("defgh", 8), ("i", 9), final_last=False)
    heat = heat_from_chunks(pieces, n_spec=2)
    assert [(s.heat, s.tokens, s.accepted, s.exact) for s in heat.spans] == [
        ("prefill", 1, None, True),
        ("some", 2, 1, True) if many_bar(2) > 1 else ("many", 2, 1, True),
        ("unknown", 5, None, False),
        ("single", 1, 0, True),
    ]


def test_chunk_path_final_chunk_is_many_only_when_its_lower_bound_is() -> None:
    pieces = chunks_of(("A", 1), ("bcdef", 6), ("ghijk", 11))  # last: 5 tokens, cut
    heat = heat_from_chunks(pieces, n_spec=8)
    assert heat.spans[-1].heat == "many"  # at least 4 accepted, the bar for K = 8


def test_chunk_path_prefill_merged_with_steps() -> None:
    heat = heat_from_chunks(chunks_of(("Abc", 3), ("d", 4), final_last=False), n_spec=4)
    assert [s.heat for s in heat.spans] == ["unknown", "single"]


def test_chunk_path_missing_counts() -> None:
    # No usage at all: everything unknown, nothing invented.
    none = heat_from_chunks(chunks_of(("A", None), ("bcd", None)), n_spec=4)
    assert [s.heat for s in none.spans] == ["unknown", "unknown"]
    assert none.tokens_by_heat()["many"] == 0
    # A gap in the counts: the gap and the chunk whose difference covers it are unknown.
    gap = heat_from_chunks(
        chunks_of(("A", 1), ("bc", None), ("de", 5), ("f", 6), final_last=False), n_spec=4
    )
    assert [(s.heat, s.tokens) for s in gap.spans] == [
        ("prefill", 1),
        ("unknown", None),
        ("unknown", None),
        ("single", 1),
    ]
    # A count that shrinks is not trusted.
    shrink = heat_from_chunks(chunks_of(("A", 1), ("bc", 0), final_last=False), n_spec=4)
    assert [s.heat for s in shrink.spans] == ["prefill", "unknown"]


def test_chunk_path_without_k() -> None:
    # Without K a multi-token chunk could be one step or several: unknown; one token is one step.
    pieces = chunks_of(("A", 1), ("bcd", 4), ("e", 5), final_last=False)
    heat = heat_from_chunks(pieces, n_spec=None)
    assert [s.heat for s in heat.spans] == ["prefill", "unknown", "single"]


def test_empty_answer() -> None:
    assert heat_from_chunks([], n_spec=4).spans == ()
    assert heat_from_chunks(chunks_of(), n_spec=4).spans == ()
    assert heat_from_steps(b"\x02", TokenMap([], 0), n_spec=4).spans == ()


def test_steps_path_exact_per_token() -> None:
    # 12 tokens of one char each; steps accepted 3, 0, 4, 1 -> 4, 1, 5, 2 tokens after prefill.
    text_len = 12
    token_map = TokenMap.from_token_ends(list(range(1, 13)), text_len)
    heat = heat_from_steps(bytes([3, 0, 4, 1]), token_map, n_spec=4, completion_tokens=12)
    assert heat.source == "server"
    got = [(s.start, s.end, s.heat, s.accepted, s.exact) for s in heat.spans]
    assert got == [
        (0, 1, "prefill", None, True),
        (1, 5, "many", 3, True),
        (5, 6, "single", 0, True),
        (6, 11, "many", 4, True),
        (11, 12, "some", 1, True),  # the last step made 2 tokens, only 1 fits: clipped
    ]


def test_steps_path_inside_merged_chunks_is_spread_and_marked_inexact() -> None:
    # The reader merged everything after the prefill into one chunk of 6 tokens / 12 chars.
    pieces = [TextPiece("", 0), TextPiece("AA", 1), TextPiece("bbccccddddee", 7, True)]
    heat = heat_from_steps(bytes([1, 2, 1]), TokenMap.from_pieces(pieces), n_spec=4)
    got = [(s.start, s.end, s.heat, s.exact) for s in heat.spans]
    # Steps of 2, 3, 2 tokens; 2 chars per token inside the chunk.
    assert got == [
        (0, 2, "prefill", True),
        (2, 6, "some", False),
        (6, 12, "many", False),
        (12, 14, "some", False),
    ]
    assert heat.spans[-1].end == sum(len(p.text) for p in pieces)


def test_steps_path_step_array_shorter_than_the_answer() -> None:
    token_map = TokenMap.from_token_ends(list(range(1, 11)), 10)
    heat = heat_from_steps([0, 0], token_map, n_spec=4, completion_tokens=10)
    assert [(s.heat, s.first_token, s.tokens) for s in heat.spans] == [
        ("prefill", 0, 1),
        ("single", 1, 1),
        ("single", 2, 1),
        ("unknown", 3, 7),
    ]


def _row(spec_steps: SpecSteps | None, completion_tokens: int) -> RequestRow:
    base = RequestRow(
        request_id="r1",
        source="http://127.0.0.1:1",
        model="m",
        outcome="ok",
        error=None,
        t_send=0.0,
        t_end=1.0,
        temperature=0.0,
        max_tokens=100,
        prompt_tokens=5,
        completion_tokens=completion_tokens,
        ttft_s=0.1,
        e2el_s=1.0,
        tpot_s=0.1,
        decode_tok_s=10.0,
        e2e_tok_s=10.0,
        itl_p50_s=None,
        itl_p99_s=None,
        chunks=0,
        decode_chunks=0,
        merged_chunks=None,
        single_token_chunks=0,
        acceptance=None,
        acceptance_server=None,
        acceptance_chunks=None,
        acceptance_metrics=None,
        spec_steps=None,
        spec_decoding_note=None,
        overlapping_requests=0,
        vanilla=None,
    )
    return replace(base, spec_steps=spec_steps)


def test_answer_heat_prefers_the_server_array() -> None:
    events = [
        StreamChunk(0.0, "r1", role="assistant", completion_tokens=0),
        StreamChunk(0.1, "r1", text="A", completion_tokens=1),
        StreamChunk(0.2, "r1", text="bcdefgh", completion_tokens=6),  # merged: 3 + 2 tokens
        StreamChunk(0.3, "r1", text="i", completion_tokens=7, finish_reason="length"),
    ]
    pieces = pieces_from_chunks(events)
    row = _row(SpecSteps(accepted=bytes([2, 1, 0]), drafted=None, total=3), 7)
    server = answer_heat(pieces, n_spec=4, row=row)
    assert server.source == "server"
    assert [(s.heat, s.tokens) for s in server.spans] == [
        ("prefill", 1),
        ("many", 3),
        ("some", 2),
        ("single", 1),
    ]
    # The last step ends on a chunk boundary: exact; the split inside the merged chunk is not.
    assert [s.exact for s in server.spans] == [True, False, False, True]
    # No server array: the chunks decide (K = 4: 5 tokens is one step, not a merge).
    chunks = answer_heat(pieces, n_spec=4, row=_row(None, 7))
    assert chunks.source == "chunks"
    assert [s.heat for s in chunks.spans] == ["prefill", "many", "unknown"]
    # With per-token offsets every boundary is exact.
    exact = answer_heat(pieces, n_spec=4, row=row, token_ends=[1, 3, 4, 5, 7, 8, 9])
    assert all(s.exact for s in exact.spans)
    assert [(s.start, s.end) for s in exact.spans] == [(0, 1), (1, 5), (5, 8), (8, 9)]


def test_pieces_with_reasoning() -> None:
    events = [StreamChunk(0.0, "r", text="b", reasoning="a", completion_tokens=2)]
    assert pieces_from_chunks(events)[0].text == "b"
    assert pieces_from_chunks(events, include_reasoning=True)[0].text == "ab"


def test_coalesce_joins_runs_of_one_class() -> None:
    token_map = TokenMap.from_token_ends(list(range(1, 9)), 8)
    heat = heat_from_steps([0, 0, 3, 3], token_map, n_spec=4, completion_tokens=8)
    assert coalesce(heat.spans) == ((0, 1, "prefill"), (1, 3, "single"), (3, 8, "many"))


@pytest.mark.parametrize("n_spec", [None, 1, 4, 8, 15])
def test_spans_tile_the_text(n_spec: int | None) -> None:
    pieces = chunks_of(("A", 1), ("bcd", 4), ("", 4), ("e", 5), ("fghijklmnopq", 17), ("r", 18))
    heat = heat_from_chunks(pieces, n_spec=n_spec)
    ends = [(s.start, s.end) for s in heat.spans]
    assert ends[0][0] == 0 and ends[-1][1] == sum(len(p.text) for p in pieces)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ends))
