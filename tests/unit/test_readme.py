"""The README's set-up section: its heading says what its two commands do."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_set_up_heading_names_the_demo_and_the_tests() -> None:
    """The heading "Set-up: two commands" alone reads as two steps of one install; the second
    runs the tests (and builds a CPU vLLM), which a new user should know before running it."""
    text = README.read_text(encoding="utf-8")
    (heading,) = re.findall(r"^## Set-up.*$", text, re.M)
    assert "demo" in heading and "tests" in heading, heading
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert len(commands) == 2
    assert "specmon demo" in commands[0] and "pytest" in commands[1]
