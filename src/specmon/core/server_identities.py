"""Each attached server's own identity (model, vLLM version) in the session's SessionInfo.

A session's SessionInfo names one server (the first): its `model` and `vllm_version` are that
server's. With several servers, every server's identity is kept in `extra[IDENTITIES_KEY]`, a list
of `{"url", "model", "vllm_version"}` (JSON: it goes into the recording header too), so the second
server shows its own model and version rather than none (docs/app.md,
"Watching many servers"). Pure: no I/O.
Recordings are untrusted: an entry that is not a mapping, or a field that is not text, is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from specmon.core.events import SessionInfo

IDENTITIES_KEY = "server_identities"
MAX_IDENTITY_TEXT = 512
"""A model name or version longer than this (from a recording) is cut."""


@dataclass(frozen=True, slots=True)
class ServerIdentityView:
    """What a server said of itself: its model (the first of /v1/models) and vLLM version."""

    model: str | None = None
    vllm_version: str | None = None


def identities_extra(
    entries: Iterable[tuple[str, str | None, str | None]],
) -> list[dict[str, str | None]]:
    """The `extra[IDENTITIES_KEY]` value for (url, model, vllm_version) entries."""
    return [
        {"url": url, "model": model, "vllm_version": version} for url, model, version in entries
    ]


def _text(value: Any) -> str | None:
    return value[:MAX_IDENTITY_TEXT] if isinstance(value, str) and value else None


def server_identity(info: SessionInfo, source: str) -> ServerIdentityView:
    """The identity of the server at `source`: its entry in `extra[IDENTITIES_KEY]`, else the
    session's own fields when `source` is the session's server (or the session names none and
    keeps no list: a one-server session), else nothing known."""
    entries = info.extra.get(IDENTITIES_KEY)
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and entry.get("url") == source:
                return ServerIdentityView(
                    _text(entry.get("model")), _text(entry.get("vllm_version"))
                )
    if info.server == source or (info.server is None and not isinstance(entries, list)):
        return ServerIdentityView(info.model, info.vllm_version)
    return ServerIdentityView()
