"""A request the server refused because its prompt does not fit the model's context: the
error's words (`CONTEXT_OVERFLOW`), read by the runtime's prompt loop (which resends the request
without the conversation's oldest turn) and by the chat (its fallback when the resent request
still does not fit). Pure."""

from __future__ import annotations

import re

from specmon.core.events import RequestEnded

CONTEXT_OVERFLOW = re.compile(
    r"HTTP 400.*(context|max_model_len|maximum model length|too long)", re.IGNORECASE
)
"""A failed request's error that says the prompt does not fit the model's context."""


def is_context_overflow(ended: RequestEnded) -> bool:
    """Whether the server refused the request because its context was too long."""
    return ended.outcome == "failed" and CONTEXT_OVERFLOW.search(ended.error or "") is not None
