"""What the flags block can say about a server's own traffic, from its /metrics window.

The flags block's counts (answers, failed, vanilla-speed, transition, the cycle) are made from
the requests specmon itself sent and streamed: a `watch` of a busy server sends none, so they
stay at 0 however busy the server is. Two rules say what the /metrics window does show there:

- `others_traffic`: the server generated tokens (in the window, or since it started) while
  specmon has no answer of its own: the flags count only specmon's own requests, and say so;
- `window_vanilla`: the window's acceptance length (1 + accepted / drafts, defined only when
  drafts were proposed) is at most `WINDOW_VANILLA_AL`: the server drafts and verifies but
  keeps almost nothing, so it runs at about plain decoding's speed, whoever sends the requests.

Pure: from the views only.
"""

from __future__ import annotations

from specmon.core.views import ServerView, WindowNumbers

WINDOW_VANILLA_AL = 1.1
"""A window AL at most this while drafts are proposed = vanilla speed (almost no draft kept)."""


def others_traffic(server: ServerView | None, own_answers: int) -> bool:
    """Whether the server generated tokens that no answer of specmon's accounts for: it has
    traffic (window decode speed above 0, or generated tokens since it started) and specmon
    sent no request of its own."""
    if server is None or own_answers > 0:
        return False
    tok_s = server.window.decode_tok_s
    generated = server.lifetime.generation_tokens if server.lifetime is not None else None
    return bool((tok_s is not None and tok_s > 0) or (generated is not None and generated > 0))


def window_vanilla(window: WindowNumbers) -> bool:
    """Whether the window's drafts were almost all rejected (AL <= WINDOW_VANILLA_AL)."""
    al = window.acceptance_length
    return al is not None and al <= WINDOW_VANILLA_AL
