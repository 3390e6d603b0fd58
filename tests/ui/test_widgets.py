"""Each small widget in a tiny host app (no server): what it shows after each call."""

from __future__ import annotations

from dataclasses import replace

from tests.support.ui_fakes import SIM_SERVER, screen_text
from textual.app import App, ComposeResult

from specmon.ui.answer_numbers import AnswerNumbers
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.blocks import top_level_starts
from specmon.ui.widgets.turn import HeaderBar, format_numbers


class Host(App[None]):
    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def test_top_level_starts_marks_whole_blocks_only():
    text = "- a\n\n- b\n\nend"
    assert top_level_starts(text) == {0, 10, len(text)}
    fenced = "```\nx\n\ny\n```\n\nafter"
    assert top_level_starts(fenced) == {0, fenced.index("after"), len(fenced)}


async def test_answer_view_streams_blocks_and_relays_only_what_the_whole_text_changes():
    view = AnswerView()
    async with Host(view).run_test(size=(60, 24)) as pilot:
        for fragment in ("Para one.\n\n", "- a\n\n", "- b\n\n", "end"):
            view.append(fragment)
            await pilot.pause()
        assert view.segments == 3  # "Para one." / "- a" / "- b" settled one by one
        assert view.shown_text == "Para one.\n\n- a\n\n- b\n\nend"
        assert "end" in screen_text(pilot.app)  # the tail, drawn as plain text
        view.finish("done")
        await pilot.pause(0.2)
        # The paragraph stays as streamed; the loose list (cut at its blank line) and the tail
        # are laid out again as one block.
        assert view.rerendered_chars == len("- a\n\n- b\n\nend")
        assert view.blocks == ["Para one.\n\n", "- a\n\n- b\n\nend"]
        assert view.shown_text == "Para one.\n\n- a\n\n- b\n\nend"
        text = screen_text(pilot.app)
        assert "• a" in text and "• b" in text and "done" in text


async def test_an_unclosed_code_fence_is_closed_by_the_final_render():
    view = AnswerView()
    async with Host(view).run_test(size=(60, 24)) as pilot:
        view.append("Intro.\n\n```python\nx = 1\n")
        await pilot.pause()
        assert "```python" in screen_text(pilot.app)  # the open fence is still raw tail text
        view.finish()
        await pilot.pause(0.2)
        text = screen_text(pilot.app)
        assert "```" not in text and "x = 1" in text
        assert view.rerendered_chars == len("```python\nx = 1\n")


async def test_the_header_badge_follows_the_server():
    header = HeaderBar()
    async with Host(header).run_test(size=(140, 5)) as pilot:
        header.show(SIM_SERVER)
        await pilot.pause()
        assert "SIMULATED" in screen_text(pilot.app)
        header.show(replace(SIM_SERVER, simulated=False))
        await pilot.pause()
        assert "SIMULATED" not in screen_text(pilot.app)
        header.show(None, state="not connected")
        await pilot.pause()
        assert "not connected" in screen_text(pilot.app)


def test_numbers_line_says_dash_for_missing_and_names_sources_and_flags():
    n = AnswerNumbers(120, 205.25, 0.0812, 4.317, 0.41, "server", 71.0, 2520.0, "ok")
    assert format_numbers(n) == (
        "120 tokens · 205.2 tok/s · TTFT 81 ms · AL 4.32 (server) · accept 41% · "
        "GPU 71 °C SM 2520 MHz · ok"
    )
    missing = AnswerNumbers(None, None, None, None, None, None)
    assert format_numbers(missing) == "— tokens · — tok/s · TTFT — · AL — · accept —"
    flagged = replace(n, al_source="metrics", flag="vanilla-speed", gpu_temp_c=None)
    line = format_numbers(flagged)
    assert "AL 4.32 (/metrics)" in line and "GPU — °C SM 2520 MHz" in line
    assert line.endswith("VANILLA SPEED (F3: why)")


async def test_extra_blank_lines_between_blocks_do_not_force_a_rerender():
    view = AnswerView()
    async with Host(view).run_test(size=(60, 24)) as pilot:
        for fragment in ("One.\n\n", "\n\nTwo.\n\n", "Three"):
            view.append(fragment)
            await pilot.pause()
        view.finish()
        await pilot.pause(0.2)
        assert view.rerendered_chars == len("Three")
        assert view.shown_text == "One.\n\n\n\nTwo.\n\nThree"
