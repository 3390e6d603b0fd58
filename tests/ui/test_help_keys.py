"""The help screen (F1 / ?), the command palette (ctrl+p), themes (--theme, palette, NO_COLOR,
a broken theme file), the acceptance heat (F7 / h) and what each position is worth (F8 / w):
pilot tests of each key's visible effect, and the pure functions behind them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from tests.support.fake_views import session_view
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from textual.binding import Binding
from textual.command import CommandPalette
from textual.filter import Monochrome
from textual.widgets import Input, Static

from specmon.core.definitions import DEFINITIONS
from specmon.core.events import StreamChunk
from specmon.core.step_heat import coalesce
from specmon.core.views import SessionView, SpecSteps
from specmon.ui.app import SpecmonApp
from specmon.ui.palette import binding_commands, key_name, palette_entries
from specmon.ui.screens.chat import ChatScreen
from specmon.ui.screens.dialogs import AnswersScreen
from specmon.ui.screens.help import SECTIONS, HelpScreen, help_sections, help_text
from specmon.ui.screens.watch import DashboardScreen
from specmon.ui.screens.worth import WorthScreen
from specmon.ui.themes import bundled_theme_dir, load_themes
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.heat import HEAT_DEFAULTS, heat_colors
from specmon.ui.widgets.lines import TextLines

SIZE = (160, 45)


async def _connected(pilot) -> None:
    await wait_for_app(pilot, lambda: getattr(pilot.app.screen, "connection", None) is not None)
    await pilot.pause()


def _answers(app) -> list[AnswerView]:
    return list(app.screen.query(AnswerView))


# ------------------------------------------------------------------ help


def test_every_definition_has_its_place_on_the_help_screen() -> None:
    keys = [k for _, ks in SECTIONS for k in ks]
    assert len(keys) == len(set(keys)), "a definition is placed twice"
    assert set(keys) == {d.key for d in DEFINITIONS}
    titles = [t for t, _ in help_sections()]
    assert "Other numbers" not in titles  # every definition placed where the screen shows it
    text, count = help_text()
    assert count == len(DEFINITIONS)
    for d in DEFINITIONS:
        assert f"  {d.name}" in text.plain and d.short in text.plain, d.key


def test_help_search_keeps_only_matching_definitions() -> None:
    text, count = help_text("thermal")
    assert 0 < count < len(DEFINITIONS)
    assert "throttling" in text.plain and "TTFT" not in text.plain
    text, count = help_text("no such words at all")
    assert count == 0 and "Nothing matches" in text.plain


@pytest.mark.slow
async def test_f1_opens_the_help_with_every_definition_and_escape_closes_it() -> None:
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f1")
        await wait_for_app(pilot, lambda: isinstance(app.screen, HelpScreen))
        body = app.screen.query_one("#help-body", TextLines).text.plain
        for d in DEFINITIONS:
            assert d.short in body, d.key
        # The keys of the screen it was opened on come first.
        assert "F7" in body and "heat" in body and "F8" in body
        assert f"{len(DEFINITIONS)} of {len(DEFINITIONS)} definitions" in screen_text(app)
        await pilot.press(*"kv cache")
        await pilot.pause()
        assert app.screen.shown == 1
        assert "KV cache usage" in screen_text(app) and "TTFT" not in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)


async def test_question_mark_opens_help_outside_the_prompt_and_types_inside_it() -> None:
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.query_one("#prompt", Input).value == "?"
        app.screen.query_one("#conversation").focus()
        await pilot.press("question_mark")
        await wait_for_app(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)


# ------------------------------------------------------------------ palette


def test_palette_entries_cover_every_bound_action_and_every_theme() -> None:
    app = SpecmonApp(FakePort())
    screen = ChatScreen(app.port, app.settings, None)
    commands = binding_commands(screen, app)
    listed = {(c.owner, c.action) for c in commands}
    for binding in ChatScreen.BINDINGS:
        action = binding.action  # type: ignore[union-attr]
        owner = "app" if action.startswith("app.") else "screen"
        assert (owner, action.removeprefix("app.")) in listed, action
    for binding in SpecmonApp.BINDINGS:
        assert ("app", binding.action) in listed, binding.action  # type: ignore[union-attr]
    by_action = {c.action: c for c in commands}
    assert by_action["record"].keys == ("F5", "r") and by_action["record"].title == "record"
    assert by_action["heat"].keys == ("F7", "h")
    assert by_action["help"].keys == ("F1", "?")
    assert key_name("question_mark") == "?" and key_name("f12") == "F12"
    titles = [t for t, _, _ in palette_entries(screen, app)]
    for name in ("specmon-dark", "specmon-light", "specmon-high-contrast"):
        assert f"theme: {name}" in titles


def test_every_screens_bindings_are_palette_entries() -> None:
    app = SpecmonApp(FakePort())
    screens = (
        DashboardScreen(app.port),
        HelpScreen(),
        WorthScreen(lambda: None),
        AnswersScreen(app.port),
    )
    for screen in screens:
        listed = {(c.owner, c.action) for c in binding_commands(screen, app)}
        for binding in Binding.make_bindings(type(screen).BINDINGS):
            action = binding.action
            owner = "app" if action.startswith("app.") else "screen"
            assert (owner, action.removeprefix("app.")) in listed, (type(screen), action)
        assert ("app", "help") in listed and ("app", "worth") in listed


@pytest.mark.slow
async def test_ctrl_p_lists_the_actions_and_a_theme_entry_switches_the_theme() -> None:
    app = SpecmonApp(FakePort(), theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert app.theme == "specmon-dark"
        await pilot.press("ctrl+p")
        await wait_for_app(pilot, lambda: isinstance(app.screen, CommandPalette))
        await wait_for_app(pilot, lambda: "key: F8 / w" in screen_text(app))
        assert "record" in screen_text(app) and "key: F5 / r" in screen_text(app)
        await pilot.press(*"theme: specmon-light")
        await wait_for_app(pilot, lambda: "switch to this colour theme" in screen_text(app))
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: app.theme == "specmon-light")
        assert isinstance(app.screen, ChatScreen)
        # An action entry runs the action on the screen it was opened on.
        await pilot.press("ctrl+p")
        await wait_for_app(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"worth")
        await wait_for_app(pilot, lambda: "key: F8 / w" in screen_text(app))
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: isinstance(app.screen, WorthScreen))


# ------------------------------------------------------------------ themes


async def test_a_broken_theme_file_says_file_and_line_and_the_default_is_used(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprimary = "#4EA1F3"\nsurface = "nonsense"\n')
    app = SpecmonApp(FakePort(), theme=str(bad))
    assert app.theme == "specmon-dark"
    assert app.theme_messages == (
        f"{bad}:3: surface = 'nonsense' is not a colour; using specmon-dark",
    )
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _connected(pilot)
        await wait_for_app(pilot, lambda: "bad.toml:3:" in screen_text(app))
        # The toast wraps the line: read its words in order.
        toast = [ln.rsplit("▌", 1)[1] for ln in screen_text(app).splitlines() if "▌" in ln]
        words = " ".join(" ".join(toast).split())
        assert "bad.toml:3: surface = 'nonsense' is not a colour; using specmon-dark" in words


async def test_a_theme_by_name_is_used_without_a_message() -> None:
    app = SpecmonApp(FakePort(), theme="specmon-high-contrast")
    assert app.theme == "specmon-high-contrast" and app.theme_messages == ()
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert (
            app.get_css_variables()["heat-many"]
            == (
                load_themes((bundled_theme_dir(),))
                .themes["specmon-high-contrast"]
                .variables["heat-many"]
            )
        )


_HEX = re.compile(r"#([0-9a-fA-F]{6})\b")
SVG_FRAME = {"ff5f57", "febc2e", "28c840", "c5c8c6"}


async def test_no_color_runs_the_app_monochrome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    port = FakePort(answers=[["Hello", " there", " friend"]])
    app = SpecmonApp(port, theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        assert app.no_color and any(isinstance(f, Monochrome) for f in app._filters)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].finished)
        await pilot.press("f7")
        await wait_for_app(pilot, lambda: _answers(app)[0].heat is not None)
        await pilot.pause()
        svg = app.export_screenshot()
    # The SVG's own frame (window buttons, default text colour) is not the app's output.
    colours = {c.lower() for c in _HEX.findall(svg)} - SVG_FRAME
    assert len(colours) >= 3, "no shades in the screenshot"
    tinted = sorted(c for c in colours if not (c[0:2] == c[2:4] == c[4:6]))
    assert tinted == [], tinted


# ------------------------------------------------------------------ acceptance heat


def _chunk(feed, t: float, text: str, cum: int | None) -> None:
    feed.emit(StreamChunk(t=t, request_id=feed.request_id, text=text, completion_tokens=cum))


def _styles_by_run(answer: AnswerView) -> list[tuple[str, str | None]]:
    shown = answer.heat_shown
    assert shown is not None
    out = []
    for span in shown.spans:
        style = span.style
        bg = style.bgcolor.name if style.bgcolor is not None else None  # type: ignore[union-attr]
        out.append((shown.plain[span.start : span.end], bg))
    return out


async def test_heat_from_chunks_marks_a_merged_chunk_unknown() -> None:
    port = FakePort(hold=True)  # n_spec 8: "many" from 4 accepted, merged above 9 tokens
    app = SpecmonApp(port, theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: len(port.feeds) == 1)
        feed = port.feeds[0]
        for i, (text, cum) in enumerate(
            [("Hi", 1), (" there", 2), (" friend,", 7), (" merged text", 20), (" end.", 22)]
        ):
            _chunk(feed, 0.1 + i * 0.02, text, cum)
        feed.tokens = 22
        feed.end()
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].finished)
        answer = _answers(app)[0]
        assert answer.heat is None
        assert not app.screen.query_one("#heat-legend").display
        await pilot.press("f7")
        await wait_for_app(pilot, lambda: answer.heat_shown is not None)
        assert answer.heat.source == "chunks"
        assert coalesce(answer.heat.spans) == (
            (0, 2, "prefill"),
            (2, 8, "single"),
            (8, 16, "many"),
            (16, 28, "unknown"),
            (28, 33, "some"),
        )
        shades = {c: v.lower() for c, v in heat_colors(app.get_css_variables()).items()}
        assert _styles_by_run(answer) == [
            ("Hi", shades["prefill"]),
            (" there", shades["single"]),
            (" friend,", shades["many"]),
            (" merged text", shades["unknown"]),
            (" end.", shades["some"]),
        ]
        legend = str(app.screen.query_one("#heat-legend", Static).content)
        assert "step accepted 4+ drafts of 8" in legend
        assert "1 token/step (vanilla-like)" in legend and "unknown (merged chunks)" in legend
        text = screen_text(app)
        assert "Hi there friend, merged text end." in text and "heat:" in text
        # The key again: back to the Markdown rendering, legend gone.
        await pilot.press("f7")
        await pilot.pause()
        assert answer.heat is None and answer.heat_shown is None
        assert not app.screen.query_one("#heat-legend").display
        assert answer.settled.display


def _view_with_steps(rid: str, accepted: bytes, tokens: int) -> SessionView:
    view = session_view(prefix="r")
    row = next(r for r in view.rows if r.request_id == rid)
    row = dataclasses.replace(
        row, spec_steps=SpecSteps(accepted, None, len(accepted)), completion_tokens=tokens
    )
    return dataclasses.replace(view, rows=(row,))


async def test_heat_from_the_servers_step_array_is_exact_inside_a_chunk() -> None:
    port = FakePort(hold=True)
    app = SpecmonApp(port, theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: len(port.feeds) == 1)
        feed = port.feeds[0]
        # One char per token; the last chunk holds two steps (5 accepted, then 1).
        for i, (text, cum) in enumerate([("A", 1), ("B", 2), ("CCCCCCDD", 10)]):
            _chunk(feed, 0.1 + i * 0.02, text, cum)
        feed.tokens = 10
        feed.end()
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].finished)
        answer = _answers(app)[0]
        await pilot.press("f7")
        await wait_for_app(pilot, lambda: answer.heat_shown is not None)
        assert answer.heat.source == "chunks"  # no row yet: from the chunks
        assert coalesce(answer.heat.spans)[-1] == (2, 10, "many")
        port.fake_view = _view_with_steps("r1", bytes([0, 5, 1]), 10)
        await pilot.press("f7", "f7")  # off and on: read again
        await wait_for_app(
            pilot, lambda: answer.heat is not None and answer.heat.source == "server"
        )
        await wait_for_app(pilot, lambda: answer.heat_shown is not None)
        assert coalesce(answer.heat.spans) == (
            (0, 1, "prefill"),
            (1, 2, "single"),
            (2, 8, "many"),
            (8, 10, "some"),
        )
        shades = {c: v.lower() for c, v in heat_colors(app.get_css_variables()).items()}
        assert _styles_by_run(answer) == [
            ("A", shades["prefill"]),
            ("B", shades["single"]),
            ("CCCCCC", shades["many"]),
            ("DD", shades["some"]),
        ]


async def test_a_long_answer_is_coloured_off_the_ui_thread_with_the_same_text() -> None:
    # Each chunk one step of 5 tokens (4 accepted: "many"), 40 of them, about 520 characters.
    port = FakePort(hold=True)
    app = SpecmonApp(port, theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: len(port.feeds) == 1)
        feed = port.feeds[0]
        _chunk(feed, 0.1, "Start.", 1)
        for i in range(40):
            text = " LASTSTEPXX" if i == 39 else f" step {i:02d} text"
            _chunk(feed, 0.12 + i * 0.02, text, 1 + 5 * (i + 1))
        feed.tokens = 201
        feed.end()
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].finished)
        answer = _answers(app)[0]
        # The final Markdown render (in the worker too, at this length) is done: the tail goes.
        await wait_for_app(pilot, lambda: not answer.query_one(".tail").display)
        before = answer.background_renders
        await pilot.press("f7")
        await wait_for_app(pilot, lambda: answer.heat_shown is not None)
        assert answer.background_renders == before + 1
        assert answer.heat_shown.plain == answer.text and len(answer.text) >= 512
        assert coalesce(answer.heat.spans) == (
            (0, 6, "prefill"),
            (6, len(answer.text), "many"),
        )
        await wait_for_app(pilot, lambda: "LASTSTEPXX" in screen_text(app))


async def test_with_heat_on_an_answer_is_coloured_as_it_ends_and_again_when_its_row_arrives():
    port = FakePort(hold=True)
    app = SpecmonApp(port, theme="specmon-dark")
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        app.screen.query_one("#conversation").focus()
        await pilot.press("h")  # on before any answer: the legend shows, nothing to colour yet
        await wait_for_app(pilot, lambda: app.screen.query_one("#heat-legend").display)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: len(port.feeds) == 1)
        feed = port.feeds[0]
        for i, (text, cum) in enumerate([("A", 1), ("B", 2), ("CCCCCCDD", 10)]):
            _chunk(feed, 0.1 + i * 0.02, text, cum)
        feed.tokens = 10
        feed.end()
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].heat_shown is not None)
        answer = _answers(app)[0]
        assert answer.heat.source == "chunks"
        # The session's row with vLLM's step array arrives while the numbers settle.
        port.fake_view = _view_with_steps("r1", bytes([0, 5, 1]), 10)
        await wait_for_app(
            pilot, lambda: answer.heat is not None and answer.heat.source == "server"
        )
        assert coalesce(answer.heat.spans)[-2:] == ((2, 8, "many"), (8, 10, "some"))


def test_heat_colours_come_from_the_theme_else_the_defaults() -> None:
    assert heat_colors({}) == HEAT_DEFAULTS
    dark = load_themes((bundled_theme_dir(),)).themes["specmon-light"].variables
    assert heat_colors(dark)["many"] == dark["heat-many"]


async def test_h_toggles_heat_outside_the_prompt_and_types_inside_it() -> None:
    port = FakePort(answers=[["One", " two"]])
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        app.screen.send("q")
        await wait_for_app(pilot, lambda: _answers(app) and _answers(app)[0].finished)
        await pilot.press("h", "w")
        await pilot.pause()
        assert app.screen.query_one("#prompt", Input).value == "hw"
        assert _answers(app)[0].heat is None
        app.screen.query_one("#conversation").focus()
        await pilot.press("h")
        await wait_for_app(pilot, lambda: _answers(app)[0].heat is not None)
        assert app.screen.query_one("#heat-legend").display
        await pilot.press("w")
        await wait_for_app(pilot, lambda: isinstance(app.screen, WorthScreen))
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)


# ------------------------------------------------------------------ position worth


async def test_f8_shows_what_each_position_is_worth_and_escape_closes_it() -> None:
    port = FakePort()
    port.fake_view = session_view()
    app = SpecmonApp(port)
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("f8")
        await wait_for_app(pilot, lambda: isinstance(app.screen, WorthScreen))
        await pilot.pause()
        text = screen_text(app)
        assert "What each draft position is worth" in text
        assert "tokens/step" in text and "since start" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)


# ------------------------------------------- keys a user sees (docs/app.md, "Keys")


async def test_the_chat_footer_shows_ctrl_q_quit_and_the_help_names_each_key_once() -> None:
    """`q` types into the prompt, so the footer shows ctrl+q (it showed none); F1 lists ctrl+c
    under quit only (the app's ctrl+c quits before the screen's copy sees it), with a space
    after every key (it printed "super+cCopy"), and says that one-letter keys do not work
    while typing in the prompt."""
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        footer = screen_text(app).splitlines()[-1]
        assert "^q quit" in footer
        await pilot.press("f1")
        await wait_for_app(pilot, lambda: isinstance(app.screen, HelpScreen))
        body = app.screen.query_one("#help-body", TextLines).text.plain
        keys = body.split("\n\n", 1)[0].splitlines()[1:]
        copy = next(line for line in keys if "Copy" in line)
        assert "ctrl+c" not in copy and re.search(r"super\+c\s+Copy", copy)
        assert next(line for line in keys if "ctrl+c" in line).split()[-1] == "quit"
        worth = next(line for line in keys if line.split()[-1] != "quit" and " w " in line + " ")
        assert "w: not while typing in the prompt" in worth
        assert "TTFT (ms)" in body and "TTFT (s)" not in body  # the unit the answers show


async def test_ctrl_r_says_so_when_already_connected() -> None:
    app = SpecmonApp(FakePort())
    async with app.run_test(size=SIZE) as pilot:
        await _connected(pilot)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert any("already connected" in str(n.message) for n in app._notifications)
