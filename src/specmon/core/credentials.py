"""Where a credential may go: the origin (scheme, host, port) of the URLs it was given with.

An API key given on the command line (or taken from $OPENAI_API_KEY / $VLLM_API_KEY) belongs to
the servers named on that command line: it is sent to their origins only, never to a server
added later (the app's `a` key, a Prometheus target) nor to another origin a redirect leads to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}


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
        key = self.key_for(url)
        return {"Authorization": f"Bearer {key}"} if key else {}
