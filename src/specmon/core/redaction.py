"""Secret scrubbing applied before anything is written or printed: recordings, saved chats and
their Markdown exports, rig cards, bench and sweep results, logs, dry-run prints, error texts.
One marker, `REDACTED`, everywhere; one scrubber, `Scrubber`, for every file specmon writes.

What is removed (docs/bad-input.md, "Secrets"):

- known secret values wherever they occur: the API key in use, the values of the environment's
  token variables (`HF_TOKEN`, any `*_TOKEN`, `*_KEY`, `*_SECRET`, `*_PASSWORD`) and the
  passwords of the server URLs given (`http://user:password@host`);
- by shape, in texts that are not model text (log lines, errors, arguments, URLs): `--api-key
  VALUE` / `--api-key=VALUE`, `key=value` and JSON fields named like a key or token, Bearer
  values, `sk-…`/`hf_…` tokens, and `user:password@` in URLs;
- what the user's `--redact REGEX` patterns match (RedactPatterns): each pattern compiled on its
  own by the `regex` package, every match bounded in time (REDACT_TIMEOUT_S); a text whose
  matching runs out of time is written as REDACT_TIMED_OUT, never as it was.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    import regex  # imported where a pattern is compiled: most commands never load it

REDACTED = "[REDACTED]"
"""What a secret is replaced by, in every place specmon scrubs one."""
REDACT_TIMED_OUT = "[REDACTED: --redact timed out]"
"""What a text becomes when a `--redact` pattern could not finish matching it in time."""

log = logging.getLogger(__name__)

_NOT_DONE = r"(?!\[?REDACTED\])"
_SECRET_FLAG_NAMES = r"api[-_]?key|hf[-_]?token|token|password|secret"
_SECRET_FLAG = re.compile(rf"(?i)^--(?:{_SECRET_FLAG_NAMES})s?$")
"""A flag whose next argument is a secret (`--api-key VALUE`)."""
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # --api-key sk-…, --api-key=…, --hf-token …, --token …
    (
        re.compile(
            rf"(?i)(--(?:{_SECRET_FLAG_NAMES})s?(?:\s+|=)['\"]?)" + _NOT_DONE + r"[^\s'\",]+"
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
    # credentials inside URLs: scheme://user:password@host (a password may hold an `@`: up to
    # the authority's last one)
    (
        re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s?#]*@"),
        r"\1" + REDACTED + "@",
    ),
)

MIN_SECRET_CHARS = 4
"""Values taken from the environment or a URL's password shorter than this are not replaced
wherever they occur (a one-letter password would take that letter out of every text); they are
still removed where their shape shows them (`user:password@`, `HF_TOKEN=…`)."""

SECRET_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "VLLM_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACE_HUB_TOKEN",
    "SPECMON_API_KEY",
)
"""Environment variables whose values never reach a file, even inside a log line."""
_SECRET_ENV_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD")


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable holds a secret: a well-known token variable, or any
    `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD` or `*API_KEY*` variable."""
    upper = name.upper()
    return upper in SECRET_ENV_VARS or upper.endswith(_SECRET_ENV_SUFFIXES) or "API_KEY" in upper


def environment_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the secret variables of `environ` (is_secret_env_name)."""
    return _unique(v for k, v in environ.items() if is_secret_env_name(k))


def url_secrets(urls: Iterable[str | None]) -> tuple[str, ...]:
    """The passwords of URLs given as `scheme://user:password@host` (as written and decoded)."""
    found: list[str] = []
    for url in urls:
        if not url or "@" not in url:
            continue
        text = url.strip()
        try:
            password = urlsplit(text if "://" in text else "http://" + text).password
        except ValueError:
            continue
        if password:
            found += [password, unquote(password)]
    return _unique(found)


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for value in values:
        if value and len(value) >= MIN_SECRET_CHARS:
            out[value] = None
    return tuple(out)


def redact_literal(text: str, secrets: Iterable[str]) -> str:
    """`text` with each known secret value replaced by REDACTED (no shape matching: for model
    text, which is data). Longer values first, so one inside another leaves nothing."""
    for secret in sorted(secrets, key=len, reverse=True):
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
    """A URL without `user:password@` credentials (None stays None); everything up to the
    authority's last `@` goes, so a password holding an `@` leaves nothing behind."""
    if url is None:
        return None
    return re.sub(r"(?i)^(\s*[a-z][a-z0-9+.-]*://)[^/?#\s]*@", r"\1", url)


def redact_value(value: Any, secrets: Sequence[str] = ()) -> Any:
    """A JSON-like value with every string in it scrubbed by `redact_text`."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {str(k): redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, secrets) for v in value]
    return value


def redact_argv(argv: Iterable[str], secrets: Sequence[str] = ()) -> list[str]:
    """An argument list with secrets taken out: the value after `--api-key` (and the other
    secret flags) as its own argument, `--api-key=VALUE`, and whatever redact_text finds."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        out.append(REDACTED if secret_next else redact_text(arg, secrets))
        secret_next = bool(_SECRET_FLAG.match(arg))
    return out


def redact_env(env: Mapping[str, str], secrets: Sequence[str] = ()) -> dict[str, str]:
    """Environment variables as they may be written: secret ones' values are REDACTED."""
    return {
        name: REDACTED if is_secret_env_name(name) else redact_text(value, secrets)
        for name, value in env.items()
    }


# ---------------------------------------------------------------- --redact REGEX

REDACT_HOLD_CHARS = 256
"""`--redact`: how much of an answer's newest text is held back, per request, before it is
written (a match of a pattern can be found whole only when it is at most this long)."""
MAX_REDACT_PATTERNS = 32
MAX_REDACT_PATTERN_CHARS = 1000
REDACT_TIMEOUT_S = 0.25
"""The most time all `--redact` patterns together may spend on one text (the `regex` package's
`timeout=`): a pattern that backtracks without end, `(a+)+b` on a run of `a`s, costs at most
this per text instead of freezing the stream."""


class RedactPatternError(ValueError):
    """A `--redact` pattern that cannot be used (the message is one line)."""


class RedactTimeoutError(Exception):
    """A `--redact` pattern did not finish matching a text within REDACT_TIMEOUT_S."""


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class RedactPatterns:
    """The `--redact` patterns, each compiled on its own (no joining: a pattern's groups, flags
    and backreferences are its own), matched with a bounded time per text."""

    def __init__(
        self,
        compiled: Sequence[regex.Pattern[str]],
        *,
        timeout_s: float = REDACT_TIMEOUT_S,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._compiled = tuple(compiled)
        self.timeout_s = timeout_s
        self._clock = clock or time.monotonic
        self.timed_out = False
        """Whether some text ran out of time (the warning was given then, once)."""

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(p.pattern for p in self._compiled)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where any pattern matches `text` (non-empty matches, merged, in order);
        RedactTimeoutError when the matching ran out of time."""
        found: list[tuple[int, int]] = []
        deadline = self._clock() + self.timeout_s
        for pattern in self._compiled:
            try:
                left = max(0.001, deadline - self._clock())
                found += [
                    m.span() for m in pattern.finditer(text, timeout=left) if m.end() > m.start()
                ]
            except TimeoutError:
                self._warn(pattern.pattern)
                raise RedactTimeoutError(pattern.pattern) from None
        return _merged(found)

    def sub(self, text: str) -> str:
        """`text` with every match replaced by REDACTED; REDACT_TIMED_OUT, whole, when the
        matching ran out of time (the text is never written as it was)."""
        if not text:
            return text
        try:
            spans = self.spans(text)
        except RedactTimeoutError:
            return REDACT_TIMED_OUT
        return _replaced(text, spans)

    def _warn(self, pattern: str) -> None:
        if self.timed_out:
            return
        self.timed_out = True
        log.warning(
            "specmon: --redact %r took longer than %g s on a text; such texts are written as %s",
            pattern,
            self.timeout_s,
            REDACT_TIMED_OUT,
        )


def _replaced(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out += [text[pos:start], REDACTED]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def compile_redactions(patterns: Iterable[str]) -> RedactPatterns | None:
    """The `--redact` patterns compiled, each on its own (None for none); RedactPatternError
    (one line) names the first bad one."""
    found = list(patterns)
    if not found:
        return None
    if len(found) > MAX_REDACT_PATTERNS:
        raise RedactPatternError(f"at most {MAX_REDACT_PATTERNS} --redact patterns")
    return RedactPatterns([compile_redaction(p) for p in found])


def compile_redaction(pattern: str) -> regex.Pattern[str]:
    """One `--redact` pattern, checked: it compiles (Python's `re` syntax, by the `regex`
    package) and matches no empty text. RedactPatternError (one line, naming it) otherwise."""
    import regex

    if not pattern:
        raise RedactPatternError("--redact needs a non-empty regular expression")
    if len(pattern) > MAX_REDACT_PATTERN_CHARS:
        raise RedactPatternError(
            f"--redact pattern longer than {MAX_REDACT_PATTERN_CHARS} characters"
        )
    try:
        compiled = regex.compile(pattern, regex.VERSION0)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise RedactPatternError(f"--redact {pattern!r}: {' '.join(str(exc).split())}") from None
    try:
        empty = compiled.match("", timeout=REDACT_TIMEOUT_S) is not None
    except TimeoutError:
        empty = False
    if empty:
        raise RedactPatternError(f"--redact {pattern!r} matches empty text")
    return compiled


class StreamRedactor:
    """`--redact` for text that arrives in pieces (an answer, chunk by chunk): `feed` returns
    what may be written now, with every match replaced by REDACTED; the newest
    REDACT_HOLD_CHARS characters (and any match that could still grow) are held until more text
    comes or `feed(..., final=True)` (the answer's end) releases them. So a secret split over
    several chunks is found whole, and text is never written before it arrived.

    When the patterns run out of time on the text, the rest of the answer (what is held and
    everything after it) is written as one REDACT_TIMED_OUT."""

    def __init__(self, patterns: RedactPatterns, hold: int = REDACT_HOLD_CHARS) -> None:
        self._patterns = patterns
        self._hold = hold
        self._pending = ""
        self._given_up = False

    @property
    def pending(self) -> str:
        return self._pending

    def feed(self, text: str, *, final: bool = False) -> str:
        if self._given_up:
            return ""
        pending = self._pending + text
        try:
            spans = self._patterns.spans(pending)
        except RedactTimeoutError:
            self._given_up = True
            self._pending = ""
            return REDACT_TIMED_OUT
        limit = len(pending) - self._hold
        out: list[str] = []
        pos = 0
        cut: int | None = None
        for start, end in spans:
            # A match reaching into the held text may still grow: hold it whole (unless it is
            # already far longer than the hold, which bounds what is held).
            if not final and end > limit and limit - start <= 4 * self._hold:
                cut = start
                break
            out.append(pending[pos:start])
            out.append(REDACTED)
            pos = end
        held_from = limit if cut is None else min(limit, cut)
        end = len(pending) if final else max(pos, held_from)
        out.append(pending[pos:end])
        self._pending = pending[end:]
        return "".join(out)


# ---------------------------------------------------------------- the one scrubber


@dataclass(frozen=True)
class Scrubber:
    """Everything specmon writes to a file goes through one of these.

    `secrets` are known values replaced wherever they occur (the API key, the environment's
    token values, URL passwords: `Scrubber.of` gathers them); `patterns` are the user's
    `--redact` patterns. `data` is for text that is data (prompts, answers: only known values
    and the user's patterns, never by shape); `text` for everything else (errors, log lines,
    names, arguments), which is also scrubbed by shape (redact_text)."""

    secrets: tuple[str, ...] = ()
    patterns: RedactPatterns | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        secrets: Iterable[str | None] = (),
        *,
        urls: Iterable[str | None] = (),
        environ: Mapping[str, str] | None = None,
        redact: Iterable[str] | RedactPatterns | None = None,
    ) -> Scrubber:
        """A scrubber for known `secrets` (any length), the passwords of `urls`, the secret
        values of `environ` (none when None), and `--redact` patterns (RedactPatternError for
        a bad one)."""
        given = [s for s in secrets if s]
        found = [*given, *url_secrets(urls)]
        if environ is not None:
            found += environment_secrets(environ)
        if redact is None or isinstance(redact, RedactPatterns):
            patterns = redact
        else:
            patterns = compile_redactions(redact)
        return cls(tuple(dict.fromkeys(found)), patterns)

    def adding(self, *secrets: str) -> Scrubber:
        """This scrubber with more known values."""
        new = tuple(s for s in secrets if s and s not in self.secrets)
        return Scrubber((*self.secrets, *new), self.patterns) if new else self

    def _user(self, text: str) -> str:
        return self.patterns.sub(text) if self.patterns is not None else text

    def literal(self, text: str) -> str:
        """Known values only (model text that `--redact` has already been applied to)."""
        return redact_literal(text, self.secrets)

    def data(self, text: str) -> str:
        """Text that is data (a prompt, an answer): known values and `--redact` matches."""
        return self._user(redact_literal(text, self.secrets))

    def text(self, text: str) -> str:
        """Any other text: known values, secrets by shape and `--redact` matches."""
        return self._user(redact_text(text, self.secrets))

    def url(self, url: str | None) -> str | None:
        """A URL without `user:password@`, then scrubbed as text."""
        bare = redact_url(url)
        return None if bare is None else self.text(bare)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it (not the keys' names) scrubbed as text; a
        string that is a URL loses its `user:password@` whole (it stays a usable URL); a string
        under a secret-looking name (`HF_TOKEN`, `api_key`, `*_SECRET`: is_secret_env_name) is
        REDACTED; a list of strings is read as an argument list (`--api-key VALUE`)."""
        if isinstance(value, str):
            return self.text(redact_url(value) or "")
        if isinstance(value, dict):
            return {
                str(k): REDACTED
                if isinstance(v, str) and v and is_secret_env_name(str(k))
                else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            if value and all(isinstance(v, str) for v in value):
                return self.argv(redact_url(v) or "" for v in value)
            return [self.value(v) for v in value]
        return value

    def argv(self, argv: Iterable[str]) -> list[str]:
        """An argument list: `--api-key VALUE` and the rest (redact_argv), and `--redact`."""
        return [self._user(a) for a in redact_argv(argv, self.secrets)]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Environment variables: secret ones' values REDACTED, the rest scrubbed as text."""
        return {k: self._user(v) for k, v in redact_env(env, self.secrets).items()}
