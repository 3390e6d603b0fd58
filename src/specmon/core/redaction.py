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


REDACT_HOLD_CHARS = 256
"""`--redact`: how much of an answer's newest text is held back, per request, before it is
written (a match of a pattern can be found whole only when it is at most this long)."""
MAX_REDACT_PATTERNS = 32
MAX_REDACT_PATTERN_CHARS = 1000


class RedactPatternError(ValueError):
    """A `--redact` pattern that cannot be used (the message is one line)."""


def compile_redactions(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern matching any of `patterns` (None for none); RedactPatternError names the
    bad one."""
    found = list(patterns)
    if not found:
        return None
    if len(found) > MAX_REDACT_PATTERNS:
        raise RedactPatternError(f"at most {MAX_REDACT_PATTERNS} --redact patterns")
    for pattern in found:
        if not pattern:
            raise RedactPatternError("--redact needs a non-empty regular expression")
        if len(pattern) > MAX_REDACT_PATTERN_CHARS:
            raise RedactPatternError(
                f"--redact pattern longer than {MAX_REDACT_PATTERN_CHARS} characters"
            )
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise RedactPatternError(f"--redact {pattern!r}: {exc}") from None
        if compiled.match(""):
            raise RedactPatternError(f"--redact {pattern!r} matches empty text")
    return re.compile("|".join(f"(?:{p})" for p in found))


class StreamRedactor:
    """`--redact` for text that arrives in pieces (an answer, chunk by chunk): `feed` returns
    what may be written now, with every match replaced by REDACTED; the newest
    REDACT_HOLD_CHARS characters (and any match that could still grow) are held until more text
    comes or `feed(..., final=True)` (the answer's end) releases them. So a secret split over
    several chunks is found whole, and text is never written before it arrived."""

    def __init__(self, pattern: re.Pattern[str], hold: int = REDACT_HOLD_CHARS) -> None:
        self._pattern = pattern
        self._hold = hold
        self._pending = ""

    @property
    def pending(self) -> str:
        return self._pending

    def feed(self, text: str, *, final: bool = False) -> str:
        pending = self._pending + text
        limit = len(pending) - self._hold
        out: list[str] = []
        pos = 0
        cut: int | None = None
        for match in self._pattern.finditer(pending):
            if match.end() == match.start():
                continue
            # A match reaching into the held text may still grow: hold it whole (unless it is
            # already far longer than the hold, which bounds what is held).
            if not final and match.end() > limit and limit - match.start() <= 4 * self._hold:
                cut = match.start()
                break
            out.append(pending[pos : match.start()])
            out.append(REDACTED)
            pos = match.end()
        held_from = limit if cut is None else min(limit, cut)
        end = len(pending) if final else max(pos, held_from)
        out.append(pending[pos:end])
        self._pending = pending[end:]
        return "".join(out)
