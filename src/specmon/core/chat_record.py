"""A saved chat conversation as plain data: what the conversation store keeps and what the
Markdown export writes (turns, each answer's numbers, the server and the per-conversation system
prompt and sampling settings).

Pure (no I/O): the store (sources/conversation_store.py) reads and writes these, the chat screen
builds them. Nothing here holds an API key: `public_url` strips credentials, query and fragment
from the server URL, and `scrub` puts every text through the one scrubber (core.redaction.Scrubber:
known secret values, secrets by shape outside prompts and answers, `--redact` patterns) before it
is saved or exported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit, urlunsplit

from specmon.core.display_text import shorten
from specmon.core.redaction import Scrubber, redact_url

TITLE_CHARS = 80
"""A conversation's title is its first prompt's first line, cut to this many characters."""


@dataclass(frozen=True, slots=True)
class SavedNumbers:
    """The numbers shown under one answer (None = not measured)."""

    tokens: int | None = None
    decode_tok_s: float | None = None
    ttft_s: float | None = None
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    al_source: str | None = None
    """"server", "chunks" or "metrics": where the AL came from."""
    verdict: str = "unjudged"
    """The answer's verdict as core.verdict names it (ok, transition, vanilla-speed, failed,
    cancelled, unjudged; a name this specmon does not know reads back as unjudged)."""
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SavedTurn:
    """One prompt and its answer (possibly partial: cancelled or failed)."""

    prompt: str
    answer: str = ""
    status: str = "ok"
    """ok, cancelled or failed."""
    error: str | None = None
    numbers: SavedNumbers | None = None
    system: str | None = None
    """The system prompt the turn was sent with ("": none); None when not recorded (a turn saved
    by a specmon before per-turn system prompts: the conversation's own applies)."""


@dataclass(frozen=True, slots=True)
class SavedSettings:
    """A conversation's system prompt (the current one: what its next turn is sent with; each
    turn records its own) and sampling settings (None = the server's default)."""

    system: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class SavedServer:
    """The server a conversation talked to (a URL without credentials)."""

    url: str | None = None
    model: str | None = None
    draft_model: str | None = None
    n_spec: int | None = None
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class SavedConversation:
    """A whole conversation. `id` is None until the store has given it one."""

    turns: tuple[SavedTurn, ...]
    server: SavedServer = SavedServer()
    settings: SavedSettings = SavedSettings()
    id: int | None = None
    title: str = ""
    created_at: str = ""
    updated_at: str = ""
    first_turn: int = 0
    """The index of `turns[0]` in the whole conversation: a long conversation resumed in part
    holds its last turns only (the store keeps the earlier ones; saving writes from here on)."""
    stored_chars: int = 0
    """Resumed in part: the characters of text the whole conversation holds (0 otherwise)."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One line of the list of saved conversations."""

    id: int
    title: str
    model: str | None
    server_url: str | None
    updated_at: str
    turns: int


def public_url(url: str | None) -> str | None:
    """A server URL fit to save: no `user:password@`, no query string, no fragment (either may
    carry a key)."""
    url = redact_url(url)
    if url is None:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def title_of(turns: Iterable[SavedTurn]) -> str:
    """The first prompt's first non-blank line, cut to TITLE_CHARS cells with … (`shorten`;
    "(empty)" without one)."""
    for turn in turns:
        for line in turn.prompt.splitlines():
            line = line.strip()
            if line:
                return shorten(line, TITLE_CHARS)
    return "(empty)"


def scrub_turn(turn: SavedTurn, scrubber: Scrubber) -> SavedTurn:
    """One turn as it may be written: prompt and answer scrubbed as data (known secret values,
    `--redact` matches), the error and the verdict's reasons as text (also secrets by shape)."""
    s = scrubber
    numbers = turn.numbers
    if numbers is not None and numbers.reasons:
        numbers = replace(numbers, reasons=tuple(s.text(r) for r in numbers.reasons))
    return replace(
        turn,
        prompt=s.data(turn.prompt),
        answer=s.data(turn.answer),
        error=None if turn.error is None else s.text(turn.error),
        numbers=numbers,
        system=None if turn.system is None else s.data(turn.system),
    )


def scrub(
    conversation: SavedConversation,
    scrubber: Scrubber | Iterable[str],
    *,
    turns: tuple[SavedTurn, ...] | None = None,
) -> SavedConversation:
    """The conversation as it may be written to disk (core.redaction.Scrubber; a list of
    known secret values makes one): every text scrubbed, the server URL made public (no
    credentials, query or fragment). `turns`: the turns already scrubbed, when the caller has
    them (the chat saver scrubs each turn once)."""
    s = scrubber if isinstance(scrubber, Scrubber) else Scrubber.of(scrubber)
    if turns is None:
        turns = tuple(scrub_turn(t, s) for t in conversation.turns)
    settings = conversation.settings
    if settings.system is not None:
        settings = replace(settings, system=s.data(settings.system))
    server = conversation.server
    server = replace(
        server,
        url=s.url(public_url(server.url)),
        model=None if server.model is None else s.text(server.model),
        draft_model=None if server.draft_model is None else s.text(server.draft_model),
    )
    return replace(
        conversation,
        turns=turns,
        settings=settings,
        server=server,
        title=s.data(conversation.title),
    )
