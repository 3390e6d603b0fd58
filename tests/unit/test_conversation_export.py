"""The Markdown export of a saved conversation and the record helpers (pure)."""

from __future__ import annotations

from specmon.core.chat_record import (
    SavedConversation,
    SavedNumbers,
    SavedServer,
    SavedSettings,
    SavedTurn,
    public_url,
    scrub,
    title_of,
)
from specmon.core.conversation_export import numbers_line, to_markdown

NUMBERS = SavedNumbers(
    tokens=13,
    decode_tok_s=200.0,
    ttft_s=0.1,
    acceptance_length=4.0,
    acceptance_rate=0.375,
    al_source="chunks",
    verdict="ok",
)


def test_numbers_line_names_every_number_and_dashes_what_is_missing() -> None:
    assert numbers_line(NUMBERS) == (
        "13 tokens · 200.0 tok/s · TTFT 100 ms · AL 4.00 (chunks) · accept 38% · "
        "verdict: not at vanilla speed"
    )
    assert numbers_line(SavedNumbers(al_source="metrics", acceptance_length=2.5)) == (
        "— tokens · — tok/s · TTFT — · AL 2.50 (/metrics) · accept — · verdict: not judged"
    )
    flagged = SavedNumbers(verdict="vanilla", reasons=("AL 1.01", "decode 20 tok/s"))
    assert numbers_line(flagged).endswith("verdict: VANILLA SPEED (AL 1.01; decode 20 tok/s)")


def test_the_document_has_the_server_settings_and_each_answer_with_its_numbers() -> None:
    conv = SavedConversation(
        turns=(
            SavedTurn("What is DFlash?\n\n# not a heading", "A **drafter**.", numbers=NUMBERS),
            SavedTurn("more", "part", status="cancelled", numbers=None),
            SavedTurn("again", "", status="failed", error="HTTP 500: boom"),
        ),
        server=SavedServer("http://127.0.0.1:8000", "qwen", "z-lab/drafter", 8, True),
        settings=SavedSettings("be brief\nand kind", 0.3, None, 64),
        title="What is DFlash?",
        created_at="2026-11-24T18:00:00+00:00",
    )
    md = to_markdown(conv)
    assert md.startswith("# What is DFlash?\n")
    assert "- server: http://127.0.0.1:8000 (SIMULATED)" in md
    assert "- model: qwen" in md and "- draft: z-lab/drafter" in md and "- n_spec: 8" in md
    assert "- sampling: temperature 0.3, top-p server default, max tokens 64" in md
    assert "> be brief\n> and kind" in md
    # The prompt is quoted line by line, so its own Markdown cannot break the structure.
    assert "## 1. Prompt\n\n> What is DFlash?\n>\n> # not a heading\n" in md
    assert "### Answer\n\nA **drafter**.\n\n*13 tokens · 200.0 tok/s" in md
    assert "*cancelled: partial answer*" in md
    assert "*(no answer)*" in md and "*failed: HTTP 500: boom*" in md
    assert md.index("## 1.") < md.index("## 2.") < md.index("## 3.")
    assert md.endswith("\n") and not md.endswith("\n\n")


def test_public_url_drops_credentials_query_and_fragment() -> None:
    assert public_url("https://u:sk-1@host:8000/v1?key=sk-1#sk-1") == "https://host:8000/v1"
    assert public_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert public_url(None) is None


def test_scrub_removes_the_key_from_every_text() -> None:
    key = "sk-abcdef123456"
    conv = SavedConversation(
        turns=(
            SavedTurn(
                key,
                f"a{key}b",
                error=key,
                numbers=SavedNumbers(reasons=(f"r {key}",)),
            ),
        ),
        server=SavedServer(f"http://x:{key}@h/?k={key}", model=key),
        settings=SavedSettings(system=key),
        title=f"title {key}",
    )
    assert key not in repr(scrub(conv, [key, ""]))
    # Nothing known: prompts and answers (data) are kept as they are; an error text is still
    # scrubbed by shape (a key-shaped word in it).
    (kept,) = scrub(conv, []).turns
    assert (kept.prompt, kept.answer, kept.error) == (key, f"a{key}b", "[REDACTED]")


def test_title_is_the_first_non_blank_prompt_line_cut() -> None:
    assert title_of([SavedTurn("\n  \n  hello there \nsecond")]) == "hello there"
    assert title_of([]) == "(empty)"
    long = title_of([SavedTurn("x" * 200)])
    assert len(long) == 80 and long.endswith("…")


def test_terminal_escapes_in_model_text_are_made_visible() -> None:
    conv = SavedConversation(
        turns=(SavedTurn("hi\x1b]0;title\x07", "clear\x1b[2J\r\nok\tx\u202eevil"),),
        server=SavedServer(model="m\x1b[31m"),
    )
    md = to_markdown(conv)
    assert "\x1b" not in md and "\x07" not in md and "\r" not in md and "\u202e" not in md
    assert "clear␛[2J␍\nok\tx<U+202E>evil" in md
    assert "- model: m␛[31m" in md


def _with_systems(*systems: str | None, current: str | None) -> str:
    turns = tuple(SavedTurn(f"prompt {i}", f"answer {i}", system=s) for i, s in enumerate(systems))
    return to_markdown(SavedConversation(turns=turns, settings=SavedSettings(system=current)))


def test_a_system_prompt_set_after_turn_2_is_written_before_turn_3() -> None:
    md = _with_systems("", "", "Be terse.", "Be terse.", current="Be terse.")
    assert "System prompt:" not in md
    assert md.count("System prompt from here on:") == 1
    change = md.index("System prompt from here on:\n\n> Be terse.\n")
    assert md.index("## 2. Prompt") < change < md.index("## 3. Prompt")


def test_each_system_prompt_change_is_written_where_it_took_effect() -> None:
    md = _with_systems("first", "second", "", current="third")
    assert md.index("System prompt:\n\n> first\n") < md.index("## 1. Prompt")
    assert md.index("## 1. Prompt") < md.index("from here on:\n\n> second") < md.index("## 2.")
    assert md.index("## 2. Prompt") < md.index("*System prompt removed from here on.*")
    assert md.index("*System prompt removed") < md.index("## 3. Prompt")
    # set after the last turn: what the conversation goes on with, at the end
    assert md.index("## 3. Prompt") < md.index("System prompt for the next prompt:\n\n> third")


def test_turns_saved_without_their_system_prompt_keep_the_conversations_at_the_top() -> None:
    md = _with_systems(None, None, current="old rule")
    assert md.index("System prompt:\n\n> old rule\n") < md.index("## 1. Prompt")
    assert "from here on" not in md
