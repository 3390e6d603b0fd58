"""Secret scrubbing applied before anything is written or printed (recordings, logs, dry-run
prints, error texts): one marker, `REDACTED`, everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
"""What a secret is replaced by, in every place specmon scrubs one."""

_NOT_DONE = r"(?!\[?REDACTED\])"
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # --api-key sk-…, --api-key=…, --hf-token …, --token …
    (
        re.compile(
            r"(?i)(--(?:api[-_]?key|hf[-_]?token|token|password|secret)s?(?:\s+|=)['\"]?)"
            + _NOT_DONE
            + r"[^\s'\",]+"
        ),
        r"\1" + REDACTED,
    ),
    # api_key='…', "api_key": "…", token=…, hf_token: …, password=…, authorization: …
    (
        re.compile(
            r"(?i)(['\"]?\b[\w.-]*(?:api[-_]?keys?|token|secret|password|passwd|authorization)"
            r"['\"]?\s*[:=]\s*(?:\[\s*)?['\"]?(?:bearer\s+|basic\s+)?)"
            + _NOT_DONE
            + r"[^\s'\",\])}]+"
        ),
        r"\1" + REDACTED,
    ),
    # Bearer <token> anywhere
    (re.compile(r"(?i)(\bbearer\s+)" + _NOT_DONE + r"[A-Za-z0-9._~+/=-]+"), r"\1" + REDACTED),
    # well-known token shapes: OpenAI sk-…, Hugging Face hf_…
    (re.compile(r"\b(?:sk-[A-Za-z0-9_-]{6,}|hf_[A-Za-z0-9]{6,})"), REDACTED),
    # credentials inside URLs: scheme://user:password@host
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + REDACTED + "@"),
)


def redact_literal(text: str, secrets: Iterable[str]) -> str:
    """`text` with each known secret value replaced by REDACTED (no shape matching: for model
    text, which is data)."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with API keys, tokens, passwords and Authorization values replaced by REDACTED.

    Known secret values (the key in use, tokens from the environment) are replaced wherever they
    occur; keys written as command-line options, `key=value` pairs, JSON fields, Bearer headers,
    `sk-…`/`hf_…` tokens and `user:password@` in URLs are recognised by shape.
    """
    text = redact_literal(text, secrets)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str | None) -> str | None:
    """A URL without `user:password@` credentials (None stays None)."""
    if url is None:
        return None
    return re.sub(r"(?i)^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url)


def redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    """A JSON-like value with every string in it scrubbed by `redact_text`."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {str(k): redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, secrets) for v in value]
    return value
