"""The fenced code blocks of an answer (the copy-a-code-block key)."""

from __future__ import annotations

from specmon.core.code_blocks import code_blocks


def test_backtick_and_tilde_fences_in_order_without_the_fences() -> None:
    text = "intro\n```python\nprint(1)\n\nx = 2\n```\nmid\n~~~\nls -l\n~~~\nend"
    assert code_blocks(text) == ["print(1)\n\nx = 2", "ls -l"]


def test_a_longer_fence_holds_a_shorter_one_and_an_unclosed_fence_runs_to_the_end() -> None:
    text = "````md\n```\ninner\n```\n````\n```sh\nstill streaming"
    assert code_blocks(text) == ["```\ninner\n```", "still streaming"]


def test_no_fence_no_block_and_inline_backticks_are_not_fences() -> None:
    assert code_blocks("just `code` and ``more``") == []
    assert code_blocks("``` not a fence ` here\ntext") == []
    assert code_blocks("    ```\n    indented four: code, not a fence") == []
