"""vLLM's per-request timing metrics, validated, and the split of TTFT into server and the rest.

A vLLM server started with `--enable-per-request-metrics` (newest vLLM, reference §3.3) adds
`metrics: {time_to_first_token_ms, generation_time_ms, queue_time_ms, mean_itl_ms,
tokens_per_second}` to each response (streamed: to the final usage chunk). There is no request
field to ask for them: the server flag alone turns them on. Here:

- server TTFT = first token - scheduled (vLLM's definition), queue = scheduled - queued;
- server-side time to first token = queue + server TTFT (what the engine spent before the first
  token left it);
- client TTFT = first choice message - send (core.stream_stats);
- outside the engine = client TTFT - (queue + server TTFT): the network, the API server's own
  work (tokenising, the chat template) and the client's reading. Large when the client is far,
  the API server is busy, or the reader lags.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TIMING_FIELDS: tuple[str, ...] = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)
"""vLLM's per-request timing fields, as the response names them."""

MAX_TIMING_MS = 7 * 86_400_000.0
"""The largest time (a week, in ms) taken from a timing field; more is absurd for one request."""
MAX_TOKENS_PER_SECOND = 1e7
"""The largest tokens_per_second taken (more is absurd)."""


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """The server's per-request timings in seconds (None: the field was absent or null)."""

    queue_s: float | None = None
    ttft_s: float | None = None
    """First token - scheduled (vLLM: not from arrival)."""
    generation_s: float | None = None
    """Last token - first token."""
    mean_itl_s: float | None = None
    """Decode time / (tokens - 1): per token, so it reflects the speculation speed-up."""
    tokens_per_second: float | None = None

    @property
    def to_first_token_s(self) -> float | None:
        """Queue + server TTFT: the engine's share of the client's TTFT (None if TTFT unknown;
        a missing queue time counts as 0)."""
        if self.ttft_s is None:
            return None
        return self.ttft_s + (self.queue_s or 0.0)


def _ms(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    if not math.isfinite(v) or v < 0 or v > MAX_TIMING_MS:
        return None
    return v / 1000.0


def parse_server_timing(data: Any) -> ServerTiming | None:
    """ServerTiming from the response's `metrics` timing fields; None when there is no object or
    not one usable field. A field that is not a finite number in range is dropped (None), the
    others kept: one bad number does not hide the rest."""
    if not isinstance(data, Mapping):
        return None
    tps = data.get("tokens_per_second")
    rate: float | None = None
    if not isinstance(tps, bool) and isinstance(tps, int | float):
        t = float(tps)
        rate = t if math.isfinite(t) and 0 <= t <= MAX_TOKENS_PER_SECOND else None
    timing = ServerTiming(
        queue_s=_ms(data, "queue_time_ms"),
        ttft_s=_ms(data, "time_to_first_token_ms"),
        generation_s=_ms(data, "generation_time_ms"),
        mean_itl_s=_ms(data, "mean_itl_ms"),
        tokens_per_second=rate,
    )
    if timing == ServerTiming():
        return None
    return timing


@dataclass(frozen=True, slots=True)
class TtftSplit:
    """One answer's TTFT as the client saw it, split into the engine's share and the rest."""

    client_ttft_s: float
    server_ttft_s: float
    """Queue + the server's TTFT (the engine's time before the first token)."""
    queue_s: float | None
    outside_s: float
    """Client TTFT - the engine's share: network, API server work, client reading. It can be
    slightly negative (the two clocks differ by the arrival→queued step): shown as measured."""

    @property
    def outside_share(self) -> float | None:
        """outside / client TTFT (0..1 when both are sane; None when client TTFT is 0)."""
        if self.client_ttft_s <= 0:
            return None
        return self.outside_s / self.client_ttft_s


def ttft_split(client_ttft_s: float | None, timing: ServerTiming | None) -> TtftSplit | None:
    """The split of a client TTFT, or None when either side is unknown."""
    if client_ttft_s is None or timing is None:
        return None
    server = timing.to_first_token_s
    if server is None:
        return None
    return TtftSplit(
        client_ttft_s=client_ttft_s,
        server_ttft_s=server,
        queue_s=timing.queue_s,
        outside_s=client_ttft_s - server,
    )
