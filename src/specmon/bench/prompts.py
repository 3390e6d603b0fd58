"""Bench prompts: random prompts sized with the server's own `/tokenize`, or a prompt file.

Random prompts are words drawn with a seeded RNG per prompt (so every prompt differs from the
first word on: no shared prefix for the prefix cache to reuse), then resized until the server's
`/tokenize` (`add_special_tokens: false`, the prompt alone without the chat template) counts
`input_len` tokens, or the closest count a whole word allows. No tokenizer or model hub is needed,
and vLLM is never imported.

The FILE dataset (`--dataset FILE`) is JSON Lines: one JSON object per line,
`{"prompt": "text", "output_len": 512}` (`output_len` optional, default `--output-len`), or a bare
JSON string per line. Blank lines and lines starting with `#` are skipped. Prompts are used in file
order and cycled when `--num-prompts` asks for more. The file must be a regular file of at most
MAX_DATASET_BYTES, each line at most MAX_LINE_BYTES, each JSON value nested at most
MAX_LINE_DEPTH deep; a line that breaks a rule is named as `FILE:LINE: what is wrong`.

`bench --context-sweep LIST --dataset FILE` sizes the dataset's own text instead (text_prompts):
the prompts' texts are joined in file order with a blank line between them, prompt i of a length
starts at the start of the file's prompt (seed + i) mod P (P prompts) and runs on through the
following ones (wrapping to the first at most once), cut at the character where the server's
`/tokenize` counts the length asked; every prompt of every length asks `--output-len` tokens (a
line's `output_len` does not apply). The same seed gives the same starts at every length, so the
lengths differ only in how much of the same text comes before the answer. Text shorter than the
length asked is a DatasetError, never padded or repeated.

`/tokenize` answers are read the same way: at most MAX_TOKENIZE_BODY bytes of JSON, within
TOKENIZE_DEADLINE_S per call (sources.http_read, as every other read); anything else is a
RuntimeError naming the URL (without credentials) and what was wrong in one line, a timeout as
"timed out after 60 s reading http://host:8000/tokenize".
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from specmon.core.credentials import KeyScope
from specmon.core.redaction import redact_url
from specmon.core.safe_json import JsonError, loads_bounded
from specmon.sources.http_errors import OneLineError, describe_error
from specmon.sources.http_read import (
    HttpReadError,
    HttpStatus,
    read_answer,
)

_SYLLABLES = (
    "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "ba", "po", "lu", "ga", "fe", "zi",
    "mo", "ta", "ri", "no", "se", "el", "an", "or", "in", "us", "ar", "en", "il", "on", "um",
)  # fmt: skip
_COMMON = (
    "the", "of", "and", "to", "in", "is", "for", "on", "with", "as", "river", "stone", "light",
    "green", "slow", "house", "water", "north", "winter", "garden", "number", "market", "paper",
    "engine", "simple", "quiet", "window", "travel", "signal", "forest", "bridge", "letter",
)  # fmt: skip

_SHORT = ("the", "of", "and", "to", "in", "is", "a", "on", "as", "at", "by", "it")
MAX_SIZING_ROUNDS = 12
MAX_PAD_ROUNDS = 6
MAX_CUT_ROUNDS = 40
"""/tokenize calls to find where a dataset text is cut (a bisection over characters)."""
DATASET_JOINER = "\n\n"
"""Between two dataset prompts' texts when text_prompts runs on from one to the next."""
MAX_DATASET_BYTES = 256 * 1024 * 1024
"""A prompt file larger than this is refused (it is read whole into memory)."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""One prompt line's limit (a prompt of a million tokens is a few MiB)."""
MAX_LINE_DEPTH = 16
"""JSON nesting allowed in a prompt line (a line is an object of strings and numbers: 1)."""
MAX_TOKENIZE_BODY = 64 * 1024 * 1024
"""The most of a /tokenize answer read (the token list of the longest prompt allowed)."""
TOKENIZE_DEADLINE_S = 60.0
"""Total time one /tokenize call may take, whatever the server trickles."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One bench prompt and the output length asked for it."""

    text: str
    output_len: int
    input_tokens: int | None = None
    """Tokens the server counted for the prompt text (None when not known)."""


class DatasetError(ValueError):
    """A prompt file that cannot be used; str() says which line and why."""


def random_words(seed: int, count: int) -> list[str]:
    """`count` words from a seeded RNG: common words mixed with made-up ones."""
    rng = random.Random(seed)
    words: list[str] = []
    for _ in range(count):
        if rng.random() < 0.5:
            words.append(rng.choice(_COMMON))
        else:
            words.append("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
    return words


Counter = Callable[[str], Awaitable[int]]
"""Counts the tokens of a text (the server's /tokenize)."""


async def sized_prompt(seed: int, target: int, count_tokens: Counter) -> tuple[str, int]:
    """Random text of `target` tokens by the server's count (or the closest a word allows).

    Returns (text, tokens counted). Searches the number of words: a first guess, then
    proportional steps, then bisection between a count below and a count above the target.
    """
    pool = random_words(seed, max(8, target * 2 + 8))

    def text_of(n: int) -> str:
        nonlocal pool
        while n > len(pool):
            pool = pool + random_words(seed + len(pool) * 7919, len(pool))
        return " ".join(pool[:n])

    seen: dict[int, int] = {}
    below: tuple[int, int] | None = None  # (words, tokens) with tokens < target
    above: tuple[int, int] | None = None
    words = max(1, target)
    for _ in range(MAX_SIZING_ROUNDS):
        if words in seen:
            break
        tokens = await count_tokens(text_of(words))
        seen[words] = tokens
        if tokens == target:
            return text_of(words), tokens
        if tokens < target:
            below = max(below, (words, tokens)) if below else (words, tokens)
        else:
            above = min(above, (words, tokens)) if above else (words, tokens)
        if below and above:
            if above[0] - below[0] <= 1:
                break
            words = (below[0] + above[0]) // 2
        else:
            words = max(1, round(words * target / max(tokens, 1)))
            if words in seen:
                words = words + (1 if tokens < target else -1)
                words = max(1, words)
    best_text, best_tokens = min(
        ((text_of(w), t) for w, t in seen.items()),
        key=lambda item: (abs(item[1] - target), item[1] > target),
    )
    if below is not None and best_tokens != target:
        # A word of several tokens stepped over the target: pad the prefix below it with short
        # common words (one token each in most tokenizers) until the count is hit.
        text, tokens = text_of(below[0]), below[1]
        rng = random.Random(seed ^ 0x5EED)
        for _ in range(MAX_PAD_ROUNDS):
            candidate = (
                text + " " + " ".join(rng.choice(_SHORT) for _ in range(max(1, target - tokens)))
            )
            counted = await count_tokens(candidate)
            if abs(counted - target) < abs(best_tokens - target):
                best_text, best_tokens = candidate, counted
            if counted >= target:
                break
            text, tokens = candidate, counted
    return best_text, best_tokens


def joined_text(texts: Sequence[str], start: int, chars: int) -> str:
    """The first `chars` characters of the texts joined by DATASET_JOINER, from texts[start] on,
    wrapping to texts[0] (one lap at most)."""
    parts: list[str] = []
    left = chars
    for i in range(len(texts)):
        piece = (DATASET_JOINER if i else "") + texts[(start + i) % len(texts)]
        parts.append(piece[:left])
        left -= len(parts[-1])
        if left <= 0:
            break
    return "".join(parts)


def joined_chars(texts: Sequence[str]) -> int:
    """Characters of every text joined by DATASET_JOINER (one lap)."""
    return sum(len(t) for t in texts) + len(DATASET_JOINER) * max(0, len(texts) - 1)


async def cut_prompt(
    texts: Sequence[str], start: int, target: int, count_tokens: Counter
) -> tuple[str, int]:
    """The joined texts from texts[start] on, cut at the character where the server counts
    `target` tokens (or the closest count a character allows). Returns (text, tokens counted);
    DatasetError when all the text is shorter than `target` tokens.

    Searches the number of characters: proportional steps from a first guess of 4 characters a
    token until the target is bracketed, then interpolation once and bisection after."""
    total = joined_chars(texts)
    seen: dict[int, int] = {}
    below = (0, 0)  # (chars, tokens) with tokens < target
    above: tuple[int, int] | None = None
    chars = min(total, max(1, target * 4))
    bracketed_rounds = 0
    for _ in range(MAX_CUT_ROUNDS):
        if chars in seen:
            break
        tokens = await count_tokens(joined_text(texts, start, chars))
        seen[chars] = tokens
        if tokens == target:
            return joined_text(texts, start, chars), tokens
        if tokens < target:
            below = max(below, (chars, tokens))
            if chars >= total:
                raise DatasetError(
                    f"its text is {tokens:,} tokens in all by the server's count, fewer than "
                    f"the {target:,} asked"
                )
        else:
            above = min(above, (chars, tokens)) if above else (chars, tokens)
        if above is None:
            chars = min(total, max(chars + 1, round(chars * target / max(tokens, 1)) + 1))
            continue
        if above[0] - below[0] <= 1:
            break
        bracketed_rounds += 1
        if bracketed_rounds == 1 and above[1] > below[1]:
            share = (target - below[1]) / (above[1] - below[1])
            chars = below[0] + round((above[0] - below[0]) * share)
        else:
            chars = (below[0] + above[0]) // 2
        chars = min(above[0] - 1, max(below[0] + 1, chars))
    best, tokens = min(
        seen.items(), key=lambda item: (abs(item[1] - target), item[1] > target, -item[0])
    )
    return joined_text(texts, start, best), tokens


async def text_prompts(
    texts: Sequence[str],
    count: int,
    input_len: int,
    output_len: int,
    seed: int,
    count_tokens: Counter,
) -> list[Prompt]:
    """`count` prompts of `input_len` tokens of the dataset's own text (see the module
    docstring): prompt i starts at texts[(seed + i) mod len(texts)]."""
    made: dict[int, tuple[str, int]] = {}
    out: list[Prompt] = []
    for i in range(count):
        start = (seed + i) % len(texts)
        if start not in made:
            made[start] = await cut_prompt(texts, start, input_len, count_tokens)
        text, tokens = made[start]
        out.append(Prompt(text, output_len, tokens))
    return out


class TokenizeError(OneLineError, RuntimeError):
    """/tokenize could not count a text; str() names the URL and the fault in one line."""


class Tokenizer:
    """The server's `/tokenize` endpoint (vLLM and the simulator answer `{"count": N, ...}`)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        sizes: str = "random prompts are sized with it (use --dataset FILE on a server without it)",
    ) -> None:
        self._sizes = sizes
        """What the count is needed for, said after an HTTP error status."""
        headers = KeyScope.of(api_key, [base_url]).bearer_for(base_url)
        plain = None if base_url.startswith("https://") else httpx.AsyncHTTPTransport(verify=False)
        # httpx's own timeouts are the deadline's too: whichever ends the call, it is that long
        self._client = httpx.AsyncClient(
            timeout=TOKENIZE_DEADLINE_S, headers=headers, transport=plain
        )
        self._url = base_url.rstrip("/") + "/tokenize"
        self._where = redact_url(self._url) or self._url
        """The URL as messages name it (no credentials)."""
        self._model = model
        self.calls = 0

    async def count(self, text: str) -> int:
        """The server's token count for `text`; TokenizeError (a RuntimeError) naming the URL
        and the fault in one line (a timeout: "timed out after 60 s reading URL")."""
        self.calls += 1
        try:
            return await self._ask(text)
        except HttpStatus as exc:
            raise TokenizeError(
                f"{self._where} answered HTTP {exc.status}; {self._sizes}"
            ) from None
        except HttpReadError as exc:  # deadline, size cap, redirects: already one line
            raise TokenizeError(str(exc)) from None
        except httpx.HTTPError as exc:  # connection refused, ...
            why = describe_error(exc, what=self._where, deadline_s=TOKENIZE_DEADLINE_S)
            raise TokenizeError(why) from None

    async def _ask(self, text: str) -> int:
        payload = {"model": self._model, "prompt": text, "add_special_tokens": False}
        answer = await read_answer(
            self._client,
            self._url,
            what=self._where,
            deadline_s=TOKENIZE_DEADLINE_S,
            max_bytes=MAX_TOKENIZE_BODY,
            accept=lambda status: status == 200,
            method="POST",
            json_body=payload,
        )
        raw = answer.body
        try:
            body = loads_bounded(raw)
        except JsonError as exc:
            raise TokenizeError(
                f"{self._where} answered 200 with a body that is not usable: {exc} (it begins "
                f"{raw[:60]!r})"
            ) from None
        count = body.get("count") if isinstance(body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            tokens = body.get("tokens") if isinstance(body, dict) else None
            if isinstance(tokens, list):
                return len(tokens)
            raise TokenizeError(f"{self._where} answered without a token count")
        return count

    async def aclose(self) -> None:
        await self._client.aclose()


async def random_prompts(
    count: int, input_len: int, output_len: int, seed: int, count_tokens: Counter
) -> list[Prompt]:
    """`count` random prompts of `input_len` tokens each (seeded: the same seed, the same text)."""
    out: list[Prompt] = []
    for i in range(count):
        text, tokens = await sized_prompt(seed * 1_000_003 + i, input_len, count_tokens)
        out.append(Prompt(text, output_len, tokens))
    return out


def load_dataset(path: str | Path, default_output_len: int) -> list[Prompt]:
    """Prompts from a JSON Lines file (format and limits in the module docstring)."""
    p = Path(path)
    try:
        if not p.is_file():  # before opening: a FIFO's open would wait for a writer
            what = "is not a regular file" if p.exists() else "does not exist"
            raise DatasetError(f"the dataset {p} {what}")
        with p.open("rb") as f:
            if not _regular(f.fileno()):
                raise DatasetError(f"the dataset {p} is not a regular file")
            data = f.read(MAX_DATASET_BYTES + 1)
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {p}: {exc.strerror or exc}") from None
    if len(data) > MAX_DATASET_BYTES:
        raise DatasetError(
            f"the dataset {p} is larger than {MAX_DATASET_BYTES // 2**20} MiB (the limit)"
        )
    prompts: list[Prompt] = []
    for number, line in enumerate(data.split(b"\n"), 1):
        where = f"{p}:{number}"
        if len(line) > MAX_LINE_BYTES:
            raise DatasetError(f"{where}: the line is longer than {MAX_LINE_BYTES // 2**20} MiB")
        try:
            raw = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise DatasetError(f"{where}: not UTF-8 text") from None
        if not raw or raw.startswith("#"):
            continue
        try:
            value = loads_bounded(raw, max_depth=MAX_LINE_DEPTH)
        except JsonError as exc:
            raise DatasetError(f"{where}: {exc}") from None
        if isinstance(value, str):
            value = {"prompt": value}
        if not isinstance(value, dict) or not isinstance(value.get("prompt"), str):
            raise DatasetError(f"{where}: needs a JSON object with a string 'prompt'")
        if not value["prompt"]:
            raise DatasetError(f"{where}: the prompt is empty")
        out_len = value.get("output_len", default_output_len)
        if isinstance(out_len, bool) or not isinstance(out_len, int) or out_len < 1:
            raise DatasetError(f"{where}: output_len must be an integer >= 1")
        prompts.append(Prompt(value["prompt"], out_len))
    if not prompts:
        raise DatasetError(f"the dataset {p} has no prompts")
    return prompts


def _regular(fd: int) -> bool:
    import os
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


def cycle_to(prompts: Sequence[Prompt], count: int) -> list[Prompt]:
    """`count` prompts, the list repeated in order as often as needed."""
    return [prompts[i % len(prompts)] for i in range(count)]
