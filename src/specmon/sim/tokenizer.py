"""A small deterministic tokenizer and the chat template of the simulated server.

Not a real BPE: words with their leading space, single digits, single punctuation marks, runs of
newlines and the template's special tokens are tokens. Token ids are a stable hash of the token
text, so /tokenize, `usage.prompt_tokens` and the answers always agree, in every process.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

VOCAB_SIZE = 262_144
BOS = "<bos>"
SPECIAL_TOKENS = (BOS, "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>")
SPECIAL_IDS = {token: i for i, token in enumerate(SPECIAL_TOKENS)}

_TOKEN = re.compile(
    "|".join(re.escape(t) for t in SPECIAL_TOKENS)
    + r"| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\n+|[ \t]+(?=\S)|\s+"
)


class TemplateError(ValueError):
    """Chat messages the template cannot render; the message says which and why."""


def split_tokens(text: str) -> list[str]:
    """The token strings of `text`; joining them gives `text` back exactly."""
    return _TOKEN.findall(text)


@lru_cache(maxsize=65_536)
def token_id(token: str) -> int:
    """A stable id for a token string (special tokens get the lowest ids)."""
    special = SPECIAL_IDS.get(token)
    if special is not None:
        return special
    return len(SPECIAL_TOKENS) + zlib.crc32(token.encode("utf-8")) % (
        VOCAB_SIZE - len(SPECIAL_TOKENS)
    )


def encode(text: str, add_special_tokens: bool = True) -> list[int]:
    """Token ids of `text`, with a leading <bos> when `add_special_tokens`."""
    ids = [token_id(t) for t in split_tokens(text)]
    if add_special_tokens and not text.startswith(BOS):
        ids.insert(0, SPECIAL_IDS[BOS])
    return ids


def _content_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
            else:
                raise TemplateError(
                    f"messages[{index}].content: only text parts are supported by this model"
                )
        return "\n".join(parts)
    raise TemplateError(f"messages[{index}].content must be a string or a list of text parts")


def apply_chat_template(messages: Sequence[Any], add_generation_prompt: bool = True) -> str:
    """Render messages with a Gemma-style template (system text folded into the first user turn).

    `<bos><start_of_turn>user\\n…<end_of_turn>\\n<start_of_turn>model\\n…`
    """
    if not isinstance(messages, list | tuple) or not messages:
        raise TemplateError("messages must be a non-empty list")
    system: list[str] = []
    out = [BOS]
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TemplateError(f"messages[{i}] must be an object with role and content")
        role = message.get("role")
        text = _content_text(message.get("content"), i)
        if role in ("system", "developer"):
            system.append(text)
            continue
        if role == "user":
            if system:
                text = "\n\n".join([*system, text])
                system = []
            turn = "user"
        elif role == "assistant":
            turn = "model"
        elif role == "tool":
            turn = "user"
        else:
            raise TemplateError(
                f"messages[{i}].role must be system, developer, user, assistant or tool, "
                f"got {role!r}"
            )
        out.append(f"<start_of_turn>{turn}\n{text.strip()}<end_of_turn>\n")
    if system:
        out.append("<start_of_turn>user\n" + "\n\n".join(system) + "<end_of_turn>\n")
    if add_generation_prompt:
        out.append("<start_of_turn>model\n")
    return "".join(out)


_ANSWER_TOKENS: tuple[tuple[str, ...], ...] | None = None


def _answers() -> tuple[tuple[str, ...], ...]:
    global _ANSWER_TOKENS
    if _ANSWER_TOKENS is None:
        from specmon.sim.corpus import ANSWERS

        _ANSWER_TOKENS = tuple(tuple(split_tokens(answer)) for answer in ANSWERS)
    return _ANSWER_TOKENS


def answer_tokens(choice: int, max_tokens: int, ignore_eos: bool) -> tuple[list[str], bool]:
    """The token strings of answer number `choice` (any int; wraps around the corpus), up to
    `max_tokens`, and whether it ended on its own (True = "stop", False = "length").

    With `ignore_eos` the answer runs on into the next ones, as a model told to ignore its end
    token keeps writing, so exactly `max_tokens` come back.
    """
    answers = _answers()
    first = answers[choice % len(answers)]
    if not ignore_eos:
        if len(first) < max_tokens:
            return list(first), True
        return list(first[:max_tokens]), False
    tokens: list[str] = []
    index = choice
    while len(tokens) < max_tokens:
        if tokens:
            tokens.append("\n\n")
        tokens.extend(answers[index % len(answers)])
        index += 1
    return tokens[:max_tokens], False
