"""What `specmon web` serves, and the secrets it keeps off the app processes' command lines.

`WebPlan` is the result of reading the command line (cli/web_cmd.py builds it with argparse);
`take_api_key` and `take_url_credentials` move secrets from the served words into the apps'
environment, and `restore_argv_secrets` puts them back in an app process. Pure: no I/O beyond
the environment, nothing heavy imported.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APPS: tuple[str, ...] = ("demo", "watch", "replay")
DEFAULT_APP = "demo"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_TABS = 8
"""Pages served at once (each runs an app process of ~150 MiB, docs/web.md); more are told so."""
DEFAULT_IDLE_TIMEOUT_S = 5.0
"""A connection without a complete request head for this long is closed (web/limits.py)."""
MAX_IDLE_TIMEOUT_S = 3600.0
IDLE_TIMEOUT_ENV = "SPECMON_WEB_IDLE_TIMEOUT"
"""Seconds, instead of DEFAULT_IDLE_TIMEOUT_S (the tests make it short; a slow link, longer)."""

NO_TOKEN_CONFIRM = "--allow-any-local-user"

REFUSED_OPTIONS: dict[str, str] = {
    "json": "--json prints data instead of opening the app",
    "once": "--once prints one snapshot instead of opening the app",
    "record": "--record: every browser tab runs its own app, and all would write the same file "
    "(record from a terminal, then serve `specmon web replay FILE`)",
}
"""Options of the served commands that make no sense behind a browser page, and why."""


class WebArgsError(ValueError):
    """A command line `specmon web` cannot serve (the message is one line)."""


@dataclass(frozen=True)
class WebPlan:
    """What to serve, where: the result of reading `specmon web`'s command line."""

    app: str
    app_args: tuple[str, ...]
    host: str
    port: int
    public_url: str | None = None
    max_tabs: int = DEFAULT_MAX_TABS
    api_key: str | None = field(default=None, repr=False)
    """Given to the app processes as $OPENAI_API_KEY (see `take_api_key`)."""
    token_file: str | None = None
    no_token: bool = False
    url_secrets: tuple[tuple[int, str], ...] = field(default=(), repr=False)
    """The served words that held `user:password@` credentials, by index, as given: the app
    processes get them through their environment (see `take_url_credentials`)."""
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    """A connection that has sent no complete request head for this long is closed."""

    def app_argv(self, python: str) -> list[str]:
        """The argv of one app process."""
        return [python, "-m", "specmon", self.app, *self.app_args]

    def command(self, python: str) -> str:
        """The shell command textual-serve runs per browser session (`exec`: the shell becomes
        the app, so the process textual-serve holds is the app and its group's leader)."""
        return "exec " + shlex.join(self.app_argv(python))

    @property
    def title(self) -> str:
        """The command as the page and the terminal show it (secrets scrubbed all the same)."""
        from specmon.core.redaction import redact_text

        return redact_text(shlex.join(["specmon", self.app, *self.app_args]))


API_KEY_OPTION = "--api-key"


def take_api_key(words: Sequence[str]) -> tuple[list[str], str | None]:
    """Take `--api-key KEY` (or `--api-key=KEY`) out of the served command's words: the key goes
    to the app processes through their environment ($OPENAI_API_KEY, which the app reads when no
    --api-key is given), never through their command line, which `ps` shows and the page's title
    would. A word that is not `--api-key` but reads like it (`--api-ke`, `--api`, `--apikey`) is
    refused without its value: options are taken only as written in full (cli/args.py), so it
    would be an unknown option whose value the error names, or, were it taken as --api-key,
    a key on a command line."""
    rest: list[str] = []
    key: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        name = word.partition("=")[0]
        if name != API_KEY_OPTION and _reads_like_api_key(name):
            raise WebArgsError(
                f"{name} is not an option: write {API_KEY_OPTION} in full (options are not "
                "abbreviated)"
            )
        if word == API_KEY_OPTION and i + 1 < len(words):
            key = words[i + 1]
            i += 2
            continue
        if word.startswith(API_KEY_OPTION + "="):
            key = word.partition("=")[2]
        else:
            rest.append(word)
        i += 1
    return rest, key


def _reads_like_api_key(name: str) -> bool:
    """A prefix of --api-key (from `--ap`: `--a` may as well be --attach's), or --api-key
    written otherwise (`--apikey`, `--api_key`, `--API-KEYS`)."""
    if len(name) >= len("--ap") and API_KEY_OPTION.startswith(name):
        return True
    return re.fullmatch(r"--api[-_]?keys?", name, flags=re.IGNORECASE) is not None


ARGV_SECRETS_ENV = "SPECMON_ARGV_SECRETS"
"""The environment variable that carries the served command's words holding credentials
(`[[index, word], ...]` as JSON) to the app processes; `restore_argv_secrets` puts them back."""


def take_url_credentials(words: Sequence[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """The served words with the `user:password@` of every address in them taken out (with or
    without a scheme: `http://alice:pw@h:8000`, `alice:pw@h:8000`, `--attach=alice:pw@h`), and
    the words as given, by index: those go to the app processes through their environment,
    never through their command line (which `ps` shows to every user)."""
    rest: list[str] = []
    secrets: list[tuple[int, str]] = []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        as_option = bool(eq) and name.startswith("--")
        bare = without_userinfo(value if as_option else word)
        if bare is not None:
            secrets.append((i, word))
            word = f"{name}={bare}" if as_option else bare
        rest.append(word)
    return rest, secrets


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def without_userinfo(address: str) -> str | None:
    """`address` without the userinfo (`user:password@`) of its authority, or None when it has
    none. The scheme is optional (`alice:pw@h:8000` is how `--attach` may be given), and the
    authority ends at the first `/`, `?` or `#`; the host starts after its last `@` (as
    urllib reads it), so a password holding `@` goes whole."""
    scheme = _SCHEME.match(address)
    head = scheme.group(0) if scheme else ""
    rest = address[len(head) :]
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority = rest[:end]
    if "@" not in authority:
        return None
    return head + authority.rpartition("@")[2] + rest[end:]


def restore_argv_secrets(argv: list[str], environ: Any = None) -> list[str]:
    """In an app process of `specmon web`: `argv` (the words after `specmon`) with the words
    that held credentials put back from the environment (the variable is removed, so nothing
    this process starts inherits it). Unchanged when the variable is absent or does not fit."""
    import json

    env = os.environ if environ is None else environ
    text = env.pop(ARGV_SECRETS_ENV, None)
    if not text:
        return argv
    try:
        pairs = json.loads(text)
    except ValueError:
        return argv
    out = list(argv)
    offset = 1  # argv[0] is the served command (demo, watch, replay)
    for pair in pairs if isinstance(pairs, list) else ():
        if (
            isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[0], int)
            and isinstance(pair[1], str)
            and 0 <= pair[0] + offset < len(out)
        ):
            out[pair[0] + offset] = pair[1]
    return out


def check_served_args(plan: WebPlan, parse: Callable[[list[str]], Any]) -> None:
    """Parse the served command's arguments with its own parser now (`parse(argv)` returns the
    namespace; argparse itself reports a bad one and exits 2), so a mistake shows here, once, not
    in every browser tab; refuse the options that would not open the app."""
    words = list(plan.app_args)
    for index, word in plan.url_secrets:
        words[index] = word
    ns = parse([plan.app, *words])
    for name, why in REFUSED_OPTIONS.items():
        if getattr(ns, name, None):
            raise WebArgsError(f"cannot serve {plan.app} with {why}")
    if plan.app == "replay":
        file = Path(ns.file)
        if not file.is_file():
            raise WebArgsError(f"{ns.file}: no such recording")


def idle_timeout_from(environ: Any = None) -> float:
    """$SPECMON_WEB_IDLE_TIMEOUT (seconds, above 0 and at most an hour), else the default."""
    import math

    env = os.environ if environ is None else environ
    text = env.get(IDLE_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_IDLE_TIMEOUT_S:  # NaN fails too
        raise WebArgsError(
            f"${IDLE_TIMEOUT_ENV} must be a number of seconds above 0 and at most "
            f"{MAX_IDLE_TIMEOUT_S:g}, got {text[:40]!r}"
        )
    return value


def check_access(host: str, *, no_token: bool, confirmed: bool, token_file: str | None) -> None:
    """The token rules: `--no-token` only on a loopback host, only confirmed with
    --allow-any-local-user, never with --token-file; the confirmation only with --no-token."""
    from specmon.sources.addresses import is_loopback

    if no_token:
        if token_file is not None:
            raise WebArgsError("--no-token and --token-file do not go together")
        if not is_loopback(host):
            raise WebArgsError(
                f"--no-token is refused on --host {host}, which is not a loopback address"
            )
        if not confirmed:
            raise WebArgsError(
                "--no-token lets every user of this machine open the app and use the keys it "
                f"holds; add {NO_TOKEN_CONFIRM} to confirm"
            )
    elif confirmed:
        raise WebArgsError(f"{NO_TOKEN_CONFIRM} goes with --no-token")
