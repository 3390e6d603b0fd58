"""Who a server is: its base URL, what /version and /v1/models say, and whether it is simulated.

Apart from streaming (sources/stream_client.py): identification is two GET requests made at once
with httpx before any chat, each bounded as a whole (sources/http_read.py: deadline, size cap).
Errors never raise; they are collected in `ServerIdentity.error`, with any secret scrubbed. The
API key, when given, is sent as a bearer token (the header `core.credentials.KeyScope` makes) and
never kept.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from specmon.core.credentials import KeyScope
from specmon.core.events import SessionInfo
from specmon.sources.http_errors import describe_error
from specmon.sources.http_read import Answer, HttpReadError, read_answer
from specmon.sources.tls import verifying_context

SIMULATED_HEADER = "x-specmon-simulated"
"""The header every response of the built-in simulator carries ("1")."""

IDENTIFY_TIMEOUT_S = 10.0
"""Bound on each identification call (/version, /v1/models), the whole answer included (the two
run at once): a server that accepts connections but never answers, or trickles its answer, must
not hold `watch` or `demo` at start for longer."""

MAX_IDENTITY_BYTES = 4 * 1024 * 1024
"""Size cap of a /version or /v1/models answer (a model list is a few KB)."""


def server_base(url: str) -> str:
    """The server's base URL: no trailing slash, no `/v1`, no credentials; scheme added if missing.

    Raises ValueError with a clear message when the URL cannot be a server address.
    """
    text = url.strip()
    if not text:
        raise ValueError("empty server URL")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"server URL must be http or https, got {parts.scheme!r} in {url!r}")
    if not parts.hostname:
        raise ValueError(f"server URL has no host: {url!r}")
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"server URL has a bad port: {url!r}") from None
    if port is not None:
        netloc += f":{port}"
    path = re.sub(r"/+$", "", parts.path)
    path = re.sub(r"/v1$", "", path)
    return urlunsplit((parts.scheme, netloc, path, "", ""))


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """What a server says about itself (any field may be None when it did not say)."""

    base_url: str
    models: tuple[str, ...] = ()
    vllm_version: str | None = None
    simulated: bool = False
    profile: str | None = None
    n_spec: int | None = None
    error: str | None = None
    context_lengths: tuple[tuple[str, int], ...] = ()
    """(model id, max_model_len) for each listed model whose card gives a positive integer
    `max_model_len` (vLLM's cards do): the chat's context limit, without asking again."""

    def session_info(self, model: str | None = None) -> SessionInfo:
        """SessionInfo for a session on this server."""
        extra: dict[str, Any] = {}
        if self.profile is not None:
            extra["sim_profile"] = self.profile
        return SessionInfo(
            server=self.base_url,
            model=model or (self.models[0] if self.models else None),
            n_spec=self.n_spec,
            vllm_version=self.vllm_version,
            simulated=self.simulated,
            extra=extra,
        )


async def identify(
    url: str,
    *,
    api_key: str | None = None,
    timeout: float = IDENTIFY_TIMEOUT_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ServerIdentity:
    """Ask /version and /v1/models, each within `timeout` seconds; never raises."""
    base = server_base(url)
    secrets = (api_key,) if api_key else ()
    headers = KeyScope.of(api_key, [base]).bearer_for(base)
    version: str | None = None
    simulated = False
    profile: str | None = None
    n_spec: int | None = None
    models: tuple[str, ...] = ()
    context_lengths: tuple[tuple[str, int], ...] = ()
    errors: list[str] = []

    def clean(exc: BaseException, what: str) -> str:
        return describe_error(exc, source=base, what=what, secrets=secrets)

    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        verify=verifying_context(),
        headers=headers,
        transport=transport,
    ) as http:

        async def get(path: str) -> Answer | str:
            try:
                return await read_answer(
                    http, base + path, what=path, deadline_s=timeout, max_bytes=MAX_IDENTITY_BYTES
                )
            except (HttpReadError, httpx.HTTPError) as exc:
                return clean(exc, path)

        # Both at once: a server that never answers costs one deadline, not two.
        version_answer, models_answer = await asyncio.gather(get("/version"), get("/v1/models"))
    if isinstance(version_answer, str):
        errors.append(version_answer)
    else:
        simulated = version_answer.headers.get(SIMULATED_HEADER) == "1"
        if version_answer.status != 200:
            errors.append(f"/version: HTTP {version_answer.status}")
        else:
            try:
                body = json.loads(version_answer.body)
            except ValueError as exc:
                errors.append(clean(exc, "/version"))
                body = None
            if isinstance(body, dict):
                v = body.get("version")
                version = str(v) if v is not None else None
                simulated = simulated or body.get("simulated") is True
                p = body.get("profile")
                profile = str(p) if p is not None else None
                k = body.get("n_spec")
                n_spec = k if isinstance(k, int) and not isinstance(k, bool) else None
    if isinstance(models_answer, str):
        errors.append(models_answer)
    else:
        simulated = simulated or models_answer.headers.get(SIMULATED_HEADER) == "1"
        if models_answer.status != 200:
            errors.append(f"/v1/models: HTTP {models_answer.status}")
        else:
            try:
                listing = json.loads(models_answer.body)
                models = _model_ids(listing)
                context_lengths = _context_lengths(listing)
            except ValueError as exc:
                errors.append(clean(exc, "/v1/models"))
    return ServerIdentity(
        base_url=base,
        models=models,
        vllm_version=version,
        simulated=simulated,
        profile=profile,
        n_spec=n_spec,
        error="; ".join(errors) or None,
        context_lengths=context_lengths,
    )


def _model_ids(body: object) -> tuple[str, ...]:
    """The `id` of every entry of an OpenAI model list (entries without a string id skipped)."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise ValueError("not an OpenAI model list")
    return tuple(
        m["id"] for m in body["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)
    )


def _context_lengths(body: object) -> tuple[tuple[str, int], ...]:
    """(id, max_model_len) of every card of a model list (checked by `_model_ids`) that has a
    string id and a positive integer `max_model_len`."""
    assert isinstance(body, dict)
    out = []
    for m in body["data"]:
        if isinstance(m, dict) and isinstance(m.get("id"), str):
            n = m.get("max_model_len")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                out.append((m["id"], n))
    return tuple(out)
