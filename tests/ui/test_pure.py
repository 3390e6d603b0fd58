"""The app's pure helpers: literal text, the Markdown block splitter, the conversation's context
planning and the settings parser."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specmon.ui.conversation import (
    ChatSettings,
    Conversation,
    Turn,
    estimate_tokens,
    parse_settings,
)
from specmon.ui.formatting import visible
from specmon.ui.widgets.blocks import BlockSplitter

# ---------------------------------------------------------------- safe text


def test_control_characters_become_visible_and_inert():
    crafted = "a\x1b[2Jb\x1b]0;pwned\x07c\x1b]52;c;ZXZpbA==\x07d\re\x00\x7f\x9b1m\u202eevil"
    shown = visible(crafted)
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "\x00" not in shown and "\x7f" not in shown and "\x9b" not in shown
    assert "\u202e" not in shown
    assert shown.startswith("a\u241b[2Jb\u241b]0;pwned\u2407c")
    assert "<U+009B>" in shown and "<U+202E>" in shown and "\u2421" in shown


def test_newlines_tabs_and_markup_are_kept_as_text():
    text = "line 1\n\tline 2 [bold red]x[/] [@click=app.quit]q[/]"
    assert visible(text) == text


# ---------------------------------------------------------------- block splitter


def test_paragraphs_settle_at_blank_lines_and_the_tail_keeps_the_rest():
    s = BlockSplitter()
    assert s.feed("First para") == ""
    assert s.feed("graph.\n") == ""
    assert s.feed("\nSecond") == "First paragraph.\n\n"
    assert s.tail == "Second"


def test_a_code_fence_is_never_split_at_its_blank_lines():
    s = BlockSplitter()
    settled = s.feed("Intro.\n\n```python\ndef f():\n\n    return 1\n")
    assert settled == "Intro.\n\n"
    assert s.tail.startswith("```python")
    assert s.feed("```\n") == "```python\ndef f():\n\n    return 1\n```\n"
    assert s.tail == ""


def test_a_tilde_fence_closes_only_with_tildes():
    s = BlockSplitter()
    s.feed("~~~\ncode\n```\n\nstill code\n")
    assert s.settled == 0
    assert s.feed("~~~~\n") == "~~~\ncode\n```\n\nstill code\n~~~~\n"


chunks = st.lists(st.text(alphabet="ab `~\n#-*", min_size=0, max_size=12), min_size=0, max_size=30)


@given(chunks)
def test_settled_plus_tail_is_the_text_and_chunking_does_not_matter(parts):
    text = "".join(parts)
    piecewise = BlockSplitter()
    segments = [piecewise.feed(p) for p in parts]
    whole = BlockSplitter()
    whole_segment = whole.feed(text)
    assert "".join(segments) + piecewise.tail == text
    assert piecewise.settled == whole.settled
    assert "".join(segments) == whole_segment


# ---------------------------------------------------------------- conversation


def _turn(prompt: str, answer: str, tokens: int | None = None) -> Turn:
    return Turn(prompt, answer, status="ok", completion_tokens=tokens)


def test_the_conversation_sends_every_answered_turn_in_order():
    c = Conversation(system="be brief")
    c.turns += [_turn("q1", "a1"), _turn("q2", "a2")]
    plan = c.plan("q3", max_model_len=None, max_tokens=100)
    assert plan.messages == (
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
    )
    assert plan.drop == () and plan.notice is None and plan.max_tokens == 100


def test_a_turn_without_answer_is_not_sent():
    c = Conversation()
    c.turns += [_turn("q1", "a1"), Turn("q2", "", status="failed"), _turn("q3", "a3")]
    plan = c.plan("q4", max_model_len=None, max_tokens=None)
    assert [m for m in plan.messages if m[0] == "user"] == [("user", "q1"), ("user", "q3")]


def test_the_oldest_turns_are_dropped_to_fit_max_model_len():
    c = Conversation()
    c.turns += [_turn(f"q{i}", "x" * 300, tokens=100) for i in range(5)]
    per_turn = c.turns[0].tokens()
    fixed = estimate_tokens("new") + 16
    limit = fixed + 2 * per_turn + 200
    plan = c.plan("new", max_model_len=limit, max_tokens=200)
    assert plan.drop == (0, 1, 2)
    assert [m[1] for m in plan.messages if m[0] == "user"] == ["q3", "q4"]
    assert plan.notice is not None and "dropped the oldest 3 turns" in plan.notice
    c.apply_drops(plan)
    assert [t.dropped for t in c.turns] == [True, True, True, False, False]
    # Dropped turns stay out of later requests.
    again = c.plan("newer", max_model_len=None, max_tokens=None)
    assert [m[1] for m in again.messages if m[0] == "user"] == ["q3", "q4"]


def test_no_room_left_caps_the_answer_then_refuses_the_prompt():
    c = Conversation()
    need = estimate_tokens("p") + 16
    capped = c.plan("p", max_model_len=need + 50, max_tokens=500)
    assert capped.error is None and capped.max_tokens == 50 and "capped" in (capped.notice or "")
    refused = c.plan("p" * 3000, max_model_len=1024, max_tokens=10)
    assert refused.error is not None and "max_model_len 1024" in refused.error


def test_extra_drop_drops_more_after_the_server_said_too_long():
    c = Conversation()
    c.turns += [_turn("q1", "a1"), _turn("q2", "a2")]
    plan = c.plan("q3", max_model_len=None, max_tokens=None, extra_drop=1)
    assert plan.drop == (0,)
    assert plan.messages == (("user", "q2"), ("assistant", "a2"))


def test_settings_parse_and_refuse_bad_values():
    assert parse_settings("0.7", "0.9", "256") == ChatSettings(0.7, 0.9, 256)
    assert parse_settings("", " ", "") == ChatSettings()
    assert parse_settings("hot", "", "") == "temperature and top-p must be numbers"
    assert "top-p" in str(parse_settings("", "1.5", ""))
    assert "at least 1" in str(parse_settings("", "", "0"))
    assert "whole number" in str(parse_settings("", "", "2.5"))
    assert "0 to 100" in str(parse_settings("nan", "", ""))


def test_an_overflow_retry_marks_and_names_the_turns_it_went_without():
    c = Conversation()
    for i in range(1, 4):
        c.turns.append(Turn(f"question {i}\n[b]x[/b]", answer=f"answer {i}", status="ok"))
    c.turns.append(Turn("and now?"))  # the answer streaming
    assert c.drop_oldest(2) == (0, 1)
    assert [t.dropped for t in c.turns] == [True, True, False, False]
    notice = c.overflow_notice((0, 1))
    assert "without the oldest 2 turns" in notice
    assert "turn 1 “question 1 [b]x[/b]”, turn 2 “question 2 [b]x[/b]”" in notice
    assert c.drop_oldest(5) == (2,)  # only the turns still in the context
