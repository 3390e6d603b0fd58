"""Which API key, and where it may go: the origin (scheme, host, port) of the URLs it was given
with.

The key is resolved once, at the command line (`resolve_api_key`: `--api-key`, else
$OPENAI_API_KEY, else $VLLM_API_KEY); the layers below take it as given. It belongs to the
servers named on that command line: it is sent to their origins only, never to a server added
later (the app's `a` key, a Prometheus target) nor to another origin a redirect leads to.
`KeyScope` is the one place a key becomes an `Authorization` header.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}

API_KEY_ENV_VARS: tuple[str, ...] = ("OPENAI_API_KEY", "VLLM_API_KEY")
"""Where the key is taken from when the command line gives none, in this order."""


def resolve_api_key(explicit: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to use: the explicit one, else OPENAI_API_KEY, else VLLM_API_KEY, else None.
    Called once per command, by the command line (cli/args.py `api_key_of`)."""
    if explicit:
        return explicit
    env = os.environ if environ is None else environ
    for name in API_KEY_ENV_VARS:
        value = env.get(name)
        if value:
            return value
    return None


def origin_of(url: str) -> str | None:
    """`scheme://host:port` of an http(s) URL, lower-case, with the port always written (the
    scheme's default when none is given); None for anything else. A URL without a scheme is
    taken as http, as specmon takes server addresses."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port if port is not None else DEFAULT_PORTS[scheme]}"


@dataclass(frozen=True)
class KeyScope:
    """An API key and the origins it may be sent to."""

    key: str | None = field(default=None, repr=False)
    origins: frozenset[str] = frozenset()

    @classmethod
    def of(cls, key: str | None, urls: Iterable[str]) -> KeyScope:
        found = (origin_of(u) for u in urls)
        return cls(key or None, frozenset(o for o in found if o is not None))

    def key_for(self, url: str) -> str | None:
        """The key, when `url` is on one of the origins it was given for; else None."""
        if self.key is None:
            return None
        return self.key if origin_of(url) in self.origins else None

    def bearer_for(self, url: str) -> dict[str, str]:
        """`{"Authorization": "Bearer KEY"}` for a URL the key may go to, else `{}`."""
        key = self.key_for(url)
        return {"Authorization": f"Bearer {key}"} if key else {}
