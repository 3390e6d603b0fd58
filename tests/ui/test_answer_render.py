"""How a streamed answer is drawn (`ui/widgets/answer.py`, `ui/widgets/blocks.py`): settled pieces
render exactly as the whole text would, long fences and runs settle line by line (the redrawn
tail stays short), pieces rendered in the worker thread arrive in order with nothing lost, each
piece is rendered once per width, and the collector's full passes wait while an answer streams."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from textual.app import App, ComposeResult

from specmon.sim.corpus import ANSWERS
from specmon.ui.widgets import answer as answer_text
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.blocks import FENCE_LINES, RUN_CHARS, RUN_LINES, BlockSplitter
from specmon.ui.widgets.lines import SettledLines
from specmon.ui.widgets.markdown_lines import Piece, render_lines

ONE_PARAGRAPH = " ".join(" ".join(ANSWERS).split())
"""The corpus as one endless paragraph without a newline (as a tiny random model writes), with
its inline code spans (the fences became ```python ... ``` spans), bold and list numbers."""

MIXED = (
    "# Title\n\nPara one.\n\n- a\n- b\n\n1. one\n2. two\n\n```python\n"
    + "".join(f"x{i} = {i}  # c\n" for i in range(20))
    + "```\nAfter the fence.\n\n> quote\n\nEnd.\n\n"
)


def _pieces(text: str, step: int, **kwargs: int) -> tuple[list[Piece], BlockSplitter]:
    """The pieces AnswerView makes of `text` fed `step` characters at a time."""
    splitter = BlockSplitter(**kwargs)
    pieces = []
    for i in range(0, len(text), step):
        open_fence, continues = splitter.settled_fence, splitter.settled_mid_block
        settled = splitter.feed(text[i : i + step])
        if settled:
            before = splitter.settled - len(settled)
            gap = not continues and bool(splitter.text[:before].strip())
            pieces.append(Piece(settled, open_fence, splitter.settled_fence_marker, gap))
    return pieces, splitter


def _segments(lines) -> list[list[tuple[str, object]]]:
    return [[(s.text, s.style) for s in line.simplify()] for line in lines]


@pytest.mark.parametrize("step", [1, 7, 64])
@pytest.mark.parametrize("fence_lines", [3, FENCE_LINES])
def test_streamed_pieces_render_exactly_as_the_whole_text(step: int, fence_lines: int) -> None:
    """Pieces cut at blank lines and inside a fence look exactly like the whole text (a run cut
    at a line boundary re-wraps; the final render lays it out again)."""
    pieces, splitter = _pieces(MIXED, step, fence_lines=fence_lines, run_lines=12)
    assert splitter.tail == ""
    assert any(p.open_fence for p in pieces), "the fence was split into pieces"
    streamed = [line for piece in pieces for line in render_lines(piece, 60)]
    whole = render_lines(Piece(MIXED), 60)
    assert _segments(streamed) == _segments(whole)


def test_a_long_fence_and_a_long_run_settle_every_few_lines() -> None:
    code = "```python\n" + "".join(f"y = {i}\n" for i in range(50)) + "```\n"
    pieces, splitter = _pieces(code, 1)
    assert [p.text.count("\n") for p in pieces] == [FENCE_LINES] * 6 + [4]
    assert pieces[0].open_fence is None and pieces[0].ends_in_fence == "```"
    assert all(p.open_fence == "```python" for p in pieces[1:])
    assert pieces[-1].ends_in_fence is None
    prose = "".join(f"word {i}\n" for i in range(RUN_LINES * 2 + 5))
    pieces, splitter = _pieces(prose, 5)
    assert [p.text.count("\n") for p in pieces] == [RUN_LINES, RUN_LINES]
    assert [p.gap for p in pieces] == [False, False]  # the run goes on: no blank line between
    assert splitter.tail.count("\n") == 5


@given(st.lists(st.text(alphabet="ab `~\n", max_size=40), max_size=40))
def test_chunking_never_changes_where_text_settles(parts: list[str]) -> None:
    text = "".join(parts)
    piecewise = BlockSplitter(fence_lines=2, run_lines=3)
    states = []
    for part in parts:
        piecewise.feed(part)
    whole = BlockSplitter(fence_lines=2, run_lines=3)
    whole.feed(text)
    states = [(s.settled, s.settled_fence, s.settled_mid_block) for s in (piecewise, whole)]
    assert states[0] == states[1]
    assert piecewise.text[: piecewise.settled] + piecewise.tail == text


def test_a_paragraph_without_newline_settles_between_words_and_the_tail_stays_short() -> None:
    """A text with no newline used to stay in the redrawn tail whole (each frame re-wrapped all
    of it); it settles every RUN_CHARS characters or so, between two words, outside the inline
    code spans, and the next piece starts like a paragraph."""
    text = ONE_PARAGRAPH * 2
    splitter = BlockSplitter()
    pieces = []
    for i in range(0, len(text), 37):
        settled = splitter.feed(text[i : i + 37])
        if settled:
            pieces.append(settled)
            assert splitter.settled_mid_block and splitter.settled_fence is None
        assert len(splitter.tail) <= RUN_CHARS
    assert len(pieces) >= len(text) // RUN_CHARS - 1
    assert "".join(pieces) + splitter.tail == text
    for piece in pieces:
        assert RUN_CHARS // 2 < len(piece) <= RUN_CHARS
        assert piece.endswith(" ") and not piece.startswith(" ")  # never inside a word
        assert piece.count("`") % 2 == 0, piece  # no code span cut open
        assert not piece[0].isdigit() and piece[0] not in "#>-*+`~|"  # no list, heading ...


def test_lines_that_must_not_be_cut_inside_and_a_word_longer_than_any_limit() -> None:
    opener = BlockSplitter(run_chars=50)
    opener.feed("```python " + "word " * 100)  # may open a fence: never cut inside
    assert opener.settled == 0
    fenced = BlockSplitter(run_chars=50)
    fenced.feed("```\n" + "word " * 100)  # inside a fence: only whole lines settle
    assert fenced.settled == 0
    word = BlockSplitter(run_chars=50)
    word.feed("a" * 120)  # no space at all: a hard cut at twice the limit
    assert word.settled == 100
    after = BlockSplitter(run_chars=50)
    after.feed("b" * 70 + " tail")  # no space within the limit: the first one after it
    assert after.settled == 71
    lines = BlockSplitter(run_chars=50)
    lines.feed("short line\n" + "c" * 60)  # a word from a line's start: cut at that start
    assert lines.settled == len("short line\n")
    assert BlockSplitter(run_chars=0).feed("word " * 1000) == ""  # 0: never cut inside


@given(st.lists(st.text(alphabet="ab `~\n#1", max_size=40), max_size=40))
def test_chunking_never_changes_where_a_long_line_settles(parts: list[str]) -> None:
    text = "".join(parts)
    piecewise = BlockSplitter(fence_lines=2, run_lines=3, run_chars=6)
    for part in parts:
        piecewise.feed(part)
    whole = BlockSplitter(fence_lines=2, run_lines=3, run_chars=6)
    whole.feed(text)
    states = [(s.settled, s.settled_fence, s.settled_mid_block) for s in (piecewise, whole)]
    assert states[0] == states[1]
    assert piecewise.text[: piecewise.settled] + piecewise.tail == text


class Host(App[None]):
    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


async def test_a_long_code_block_never_piles_up_in_the_redrawn_tail() -> None:
    view = AnswerView()
    lines = [f"value_{i} = compute({i})\n" for i in range(120)]
    async with Host(view).run_test(size=(80, 140)) as pilot:
        view.append("Code:\n\n```python\n")
        for i in range(0, len(lines), 5):
            view.append("".join(lines[i : i + 5]))
            await pilot.pause()
            assert view.splitter.tail.count("\n") < FENCE_LINES
            assert view.shown_text == view.text  # nothing lost while it streams
        view.append("```\n\nDone.")
        await pilot.pause()
        assert "value_119 = compute(119)" in screen_text(pilot.app)
        assert "```" not in screen_text(pilot.app)  # the pieces show as one code block
        view.finish()
        await wait_for_app(pilot, lambda: not view.query_one(".tail").display)
        assert view.shown_text == view.text
        # The final render replaces the pieces; the screen shows it from the next paint on.
        await wait_for_app(pilot, lambda: "Done." in screen_text(pilot.app))


@pytest.mark.slow
async def test_an_answer_without_newline_streams_in_pieces_and_ends_as_the_whole_text() -> None:
    text = ONE_PARAGRAPH * 2
    view = AnswerView()
    async with Host(view).run_test(size=(100, 40)) as pilot:
        for i in range(0, len(text), 211):
            view.append(text[i : i + 211])
            await pilot.pause()
            assert len(view.splitter.tail) <= RUN_CHARS  # the redrawn tail stays short
            assert text.startswith(view.shown_text)  # nothing lost or reordered
        await wait_for_app(pilot, lambda: view.rendering == 0)
        assert len(view.blocks) >= len(text) // RUN_CHARS - 1
        view.finish()
        await wait_for_app(pilot, lambda: not view.query_one(".tail").display)
        # Cut inside a line, the streamed pieces re-wrapped; the final render lays the whole
        # text out again as one piece: exactly what the whole text renders to at once.
        assert view.settled.pieces == [Piece(text)]
        assert view.rerendered_chars == len(text)
        assert view.shown_text == text


@pytest.mark.slow
async def test_pieces_rendered_in_the_worker_thread_arrive_in_order_with_nothing_lost(
    monkeypatch,
) -> None:
    monkeypatch.setattr(answer_text, "BACKGROUND_MIN_CHARS", 1)  # every piece off the UI thread
    text = "\n\n".join(ANSWERS)
    view = AnswerView()
    async with Host(view).run_test(size=(100, 40)) as pilot:
        for i in range(0, len(text), 97):
            view.append(text[i : i + 97])
            assert text.startswith(view.shown_text)
            await pilot.pause()
            assert text.startswith(view.shown_text)  # a prefix, in order, every frame
        await wait_for_app(pilot, lambda: view.rendering == 0)
        assert view.background_renders > 5
        assert "".join(view.blocks) + view.splitter.tail == text
        view.finish()
        await wait_for_app(pilot, lambda: not view.query_one(".tail").display)
        assert view.shown_text == text


async def test_each_piece_is_rendered_once_per_width() -> None:
    settled = SettledLines()
    async with Host(settled).run_test(size=(80, 20)) as pilot:
        for i in range(6):
            settled.add(Piece(f"Paragraph {i} with **bold** text.\n\n", gap=i > 0))
            await pilot.pause()
        for _ in range(5):  # repaints and reflows render nothing again
            settled.refresh(layout=True)
            await pilot.pause()
        assert settled.renders == 6
        assert "Paragraph 5 with bold text." in screen_text(pilot.app)
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        assert settled.renders == 12  # a new width: each piece once more
        settled.replace_from(2, Piece("Replaced.", gap=True))
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "Replaced." in text and "Paragraph 2" not in text and "Paragraph 1" in text


async def test_control_characters_in_a_split_fence_are_shown_as_signs() -> None:
    view = AnswerView()
    async with Host(view).run_test(size=(80, 40)) as pilot:
        view.append("```sh\x1b[2J\n" + "echo \x1b]0;title\x07\n" * 20 + "```\n\n")
        await pilot.pause()
        view.finish()
        await wait_for_app(pilot, lambda: not view.query_one(".tail").display)
        text = screen_text(pilot.app)
        assert "echo ␛]0;title␇" in text
        assert "\x1b" not in text and "\x07" not in text


async def test_full_garbage_collections_wait_while_an_answer_streams() -> None:
    before = gc.get_threshold()
    view = AnswerView()
    async with Host(view).run_test(size=(60, 10)) as pilot:
        view.append("Streaming")
        assert gc.get_threshold()[2] > 100_000  # no full pass in the middle of the stream
        assert gc.get_threshold()[:2] == before[:2]  # young collections as before
        view.finish()
        await wait_for_app(pilot, lambda: gc.get_threshold() == before)
    gc.unfreeze()


async def test_an_answer_that_never_ends_gives_the_collector_back_when_removed() -> None:
    before = gc.get_threshold()
    view = AnswerView()
    async with Host(view).run_test(size=(60, 10)):
        view.append("Streaming, then the app closes")
        assert gc.get_threshold() != before
    assert gc.get_threshold() == before
    gc.unfreeze()
