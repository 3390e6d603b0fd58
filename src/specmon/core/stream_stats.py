"""Per-request statistics folded from RequestStarted / StreamChunk / RequestEnded events.

Definitions (docs/definitions.md has the long form):
- choice message: every StreamChunk is one. The stream client folds the usage-only message
  (`choices: []`) into RequestEnded (its arrival is RequestEnded.t), so it adds no ITL entry.
- TTFT = first choice message - send (as `vllm bench serve`: the role chunk counts).
- t_first = arrival of the first token (first chunk whose cumulative completion_tokens ≥ 1; without
  usage numbers, the first chunk with text or reasoning); t_last = arrival of the last token (last
  chunk whose cumulative count grew; without usage, the last chunk with text or reasoning).
- decode tok/s = (completion tokens - 1) / (t_last - t_first);
  e2e tok/s = tokens / (t_end - t_send).
- E2EL = t_end - t_send (t_end = RequestEnded.t, the last data message);
  TPOT = (E2EL - TTFT) / (n - 1).
- ITL = gaps between consecutive choice messages (per chunk, not per token).
- tokens of a chunk = Δ of the CUMULATIVE usage.completion_tokens to the previous chunk.
- decode chunks: chunks with tokens, except the first one (the prefill step's token); the role
  chunk (0 tokens) is not one. A decode chunk with more than K+1 tokens was merged by a slow reader:
  excluded from client AL and counted. The last chunk, when it carries the finish reason, is cut
  by the stop condition (max_tokens or the stop token) and is left out of client AL too.
  Client AL = mean tokens per remaining decode chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.numbers import as_float, as_int
from specmon.core.server_timing import ServerTiming, TtftSplit, parse_server_timing, ttft_split

MAX_SPEC_STEPS = 1_000_000
"""Most speculative steps a per-request object may report (more is absurd for one request)."""
MAX_SPEC_TOKENS = 255
"""Largest K (num_spec_tokens) accepted in a per-request object (vLLM's drafters use up to ~16)."""


@dataclass(frozen=True, slots=True)
class ServerSpecStats:
    """vLLM's per-request `metrics.speculative_decoding` (newest vLLM), validated.

    AL = 1 + accepted/steps and the draft acceptance rate = accepted/draft tokens are recomputed
    from the counts when present (vLLM's formulas). Per-position rate i = share of steps that
    accepted at least i+1 drafts, from `per_step_accepted` (detailed) or else from
    `acceptance_histogram` (index j = steps that accepted exactly j drafts).
    """

    mean_acceptance_length: float | None = None
    draft_acceptance_rate: float | None = None
    num_spec_steps: int | None = None
    num_accepted_draft_tokens: int | None = None
    num_draft_tokens: int | None = None
    num_spec_tokens: int | None = None
    per_position_rates: tuple[float, ...] | None = None
    acceptance_histogram: tuple[int, ...] | None = None
    per_step_accepted: tuple[int, ...] | None = None
    per_step_drafted: tuple[int, ...] | None = None


class SpecObjectError(ValueError):
    """A per-request speculative-decoding object that is malformed, inconsistent or too large."""


def _count(data: Mapping[str, Any], key: str, limit: int) -> int | None:
    """A count field: absent/null gives None; anything but a whole number 0..limit is an error."""
    value = data.get(key)
    if value is None:
        return None
    v = as_int(value)
    if v is None or v < 0:
        raise SpecObjectError(f"{key} is not a whole number >= 0")
    if v > limit:
        raise SpecObjectError(f"{key} {v} is absurdly large")
    return v


def _int_list(data: Mapping[str, Any], key: str, limit: int) -> tuple[int, ...] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise SpecObjectError(f"{key} is not a list")
    if len(value) > MAX_SPEC_STEPS:
        raise SpecObjectError(f"{key} has {len(value)} entries (absurdly many)")
    out: list[int] = []
    for x in value:
        v = as_int(x)
        if v is None or v < 0 or v > limit:
            raise SpecObjectError(f"{key} has an entry that is not a whole number 0..{limit}")
        out.append(v)
    return tuple(out)


def _rates_from_steps(accepted: Sequence[int], k: int) -> tuple[float, ...] | None:
    steps = len(accepted)
    if steps == 0 or k <= 0:
        return None
    return tuple(sum(1 for a in accepted if a >= i + 1) / steps for i in range(k))


def _rates_from_histogram(hist: Sequence[int], k: int) -> tuple[float, ...] | None:
    steps = sum(hist)
    if steps == 0 or k <= 0:
        return None
    return tuple(sum(hist[i + 1 :]) / steps for i in range(k))


def validate_server_spec(
    data: Any,
) -> tuple[ServerSpecStats | None, str | None]:
    """(stats, None) for a usable object; (None, note) for one that must be ignored; (None, None)
    when there is none. Never raises on any JSON value."""
    if data is None:
        return None, None
    if not isinstance(data, Mapping):
        return None, f"server per-request metrics ignored: not an object ({type(data).__name__})"
    try:
        return _validated(data), None
    except SpecObjectError as exc:
        return None, f"server per-request metrics ignored: {exc}"


def _validated(data: Mapping[str, Any]) -> ServerSpecStats:
    big = MAX_SPEC_STEPS * MAX_SPEC_TOKENS
    steps = _count(data, "num_spec_steps", MAX_SPEC_STEPS)
    accepted = _count(data, "num_accepted_draft_tokens", big)
    drafted = _count(data, "num_draft_tokens", big)
    k = _count(data, "num_spec_tokens", MAX_SPEC_TOKENS)
    limit = k if k is not None else MAX_SPEC_TOKENS
    hist = _int_list(data, "acceptance_histogram", MAX_SPEC_STEPS)
    per_acc = _int_list(data, "per_step_accepted", limit)
    per_drafted = _int_list(data, "per_step_drafted", limit)
    if accepted is not None and drafted is not None and accepted > drafted:
        raise SpecObjectError(f"accepted {accepted} above drafted {drafted}")
    if steps is not None and k is not None:
        if drafted is not None and drafted > steps * k:
            raise SpecObjectError(f"{drafted} draft tokens in {steps} steps of at most {k}")
        if accepted is not None and accepted > steps * k:
            raise SpecObjectError(f"{accepted} accepted in {steps} steps of at most {k}")
    for name, arr in (("per_step_accepted", per_acc), ("per_step_drafted", per_drafted)):
        if arr is not None and steps is not None and len(arr) != steps:
            raise SpecObjectError(f"{name} has {len(arr)} entries for {steps} steps")
    if per_acc is not None and per_drafted is not None:
        if len(per_acc) != len(per_drafted):
            raise SpecObjectError("per_step_accepted and per_step_drafted differ in length")
        if any(a > d for a, d in zip(per_acc, per_drafted, strict=True)):
            raise SpecObjectError("a step accepted more drafts than it drafted")
    if per_acc is not None and accepted is not None and sum(per_acc) != accepted:
        raise SpecObjectError("per_step_accepted does not sum to num_accepted_draft_tokens")
    if per_drafted is not None and drafted is not None and sum(per_drafted) != drafted:
        raise SpecObjectError("per_step_drafted does not sum to num_draft_tokens")
    if hist is not None:
        if k is not None and len(hist) > k + 1:
            raise SpecObjectError(f"acceptance_histogram has {len(hist)} entries for K={k}")
        if steps is not None and sum(hist) != steps:
            raise SpecObjectError("acceptance_histogram does not sum to num_spec_steps")
        if accepted is not None and sum(j * n for j, n in enumerate(hist)) != accepted:
            raise SpecObjectError("acceptance_histogram disagrees with num_accepted_draft_tokens")

    al = as_float(data.get("mean_acceptance_length"))
    if steps is not None and accepted is not None:
        al = 1.0 + accepted / steps if steps > 0 else None
    elif al is not None and al < 1.0:
        raise SpecObjectError(f"mean_acceptance_length {al} below 1")
    rate = as_float(data.get("draft_acceptance_rate"))
    if drafted is not None and accepted is not None:
        rate = accepted / drafted if drafted > 0 else None
    elif rate is not None and not 0.0 <= rate <= 1.0:
        raise SpecObjectError(f"draft_acceptance_rate {rate} outside 0..1")

    per_pos: tuple[float, ...] | None = None
    if per_acc is not None:
        width = k if k is not None else max((*per_acc, *(per_drafted or ())), default=0)
        per_pos = _rates_from_steps(per_acc, width)
    elif hist is not None:
        per_pos = _rates_from_histogram(hist, k if k is not None else len(hist) - 1)
    return ServerSpecStats(
        mean_acceptance_length=al,
        draft_acceptance_rate=rate,
        num_spec_steps=steps,
        num_accepted_draft_tokens=accepted,
        num_draft_tokens=drafted,
        num_spec_tokens=k,
        per_position_rates=per_pos,
        acceptance_histogram=hist,
        per_step_accepted=per_acc,
        per_step_drafted=per_drafted,
    )


@dataclass(slots=True)
class RequestTrace:
    """What arrived for one request: the fold of its events (mutable while the request runs)."""

    request_id: str
    started: RequestStarted | None = None
    ended: RequestEnded | None = None
    chunk_t: list[float] = field(default_factory=list)
    chunk_cum: list[int | None] = field(default_factory=list)
    chunk_has_text: list[bool] = field(default_factory=list)
    last_cum: int | None = None
    final_cut: bool = False
    """The chunk with the finish reason carried tokens: its step was cut by the stop condition."""

    def add(self, event: RequestStarted | StreamChunk | RequestEnded) -> None:
        """Fold one event of this request."""
        if isinstance(event, RequestStarted):
            self.started = event
        elif isinstance(event, RequestEnded):
            self.ended = event
        else:
            self._add_chunk(event)

    def _add_chunk(self, c: StreamChunk) -> None:
        cum = c.completion_tokens
        if cum is not None and (cum < 0 or (self.last_cum is not None and cum < self.last_cum)):
            cum = None  # a cumulative count cannot shrink: not a number to trust
        if c.finish_reason is not None and cum is not None and cum > (self.last_cum or 0):
            self.final_cut = True
        self.chunk_t.append(c.t)
        self.chunk_cum.append(cum)
        self.chunk_has_text.append(bool(c.text or c.reasoning))
        if cum is not None:
            self.last_cum = cum


@dataclass(frozen=True, slots=True)
class RequestStats:
    """The numbers of one request (None = not measurable from what arrived)."""

    request_id: str
    outcome: str
    """"ok", "failed", "cancelled", or "running" while no RequestEnded arrived."""
    error: str | None
    t_send: float | None
    t_end: float | None
    completion_tokens: int | None
    prompt_tokens: int | None
    max_tokens: int | None
    ttft_s: float | None
    e2el_s: float | None
    tpot_s: float | None
    decode_tok_s: float | None
    e2e_tok_s: float | None
    itl_s: tuple[float, ...]
    chunk_tokens: tuple[int, ...]
    """Tokens per chunk that carried tokens, in arrival order (needs continuous usage stats)."""
    decode_chunks: int
    merged_chunks: int | None
    """None when K is unknown (merges cannot be told apart)."""
    single_token_chunks: int
    client_acceptance_length: float | None
    server_spec: ServerSpecStats | None
    """The server's per-request object when present and valid (else None)."""
    t_first_token: float | None = None
    t_last_token: float | None = None
    server_spec_note: str | None = None
    """Why the server's per-request object was ignored, when it was."""
    counted_chunk_tokens: tuple[int, ...] = ()
    """Tokens of the decode chunks that client AL counts (not merged, not the cut final one)."""
    server_timing: ServerTiming | None = None
    """The server's per-request timings (`--enable-per-request-metrics`) when it sent them."""
    ttft_split: TtftSplit | None = None
    """Client TTFT split into the engine's share (queue + server TTFT) and the rest (network,
    API server, client), when both are known (core.server_timing)."""
    partial: bool = False
    """Its start was not seen (a recording begun in the middle of the answer): the decode speed
    is that of the recorded part (tokens after its first recorded chunk over their span), never
    the whole answer's tokens over the recorded span; None without token counts."""


def _first_last_token_times(
    trace: RequestTrace,
) -> tuple[float | None, float | None, list[int]]:
    """(t_first, t_last, per-chunk token deltas of chunks whose count grew)."""
    t_first = t_last = None
    deltas: list[int] = []
    prev = 0
    for t, cum in zip(trace.chunk_t, trace.chunk_cum, strict=True):
        if cum is None:
            continue
        d = cum - prev
        prev = cum
        if d > 0:
            deltas.append(d)
            if t_first is None:
                t_first = t
            t_last = t
    if t_first is None:  # no usage numbers: fall back on the chunks that carried text
        texts = [t for t, has in zip(trace.chunk_t, trace.chunk_has_text, strict=True) if has]
        if texts:
            t_first, t_last = texts[0], texts[-1]
    return t_first, t_last, deltas


def request_stats(trace: RequestTrace, *, n_spec: int | None = None) -> RequestStats:
    """The statistics of one request; `n_spec` (K) lets merged chunks be recognised."""
    started, ended = trace.started, trace.ended
    t_send = started.t if started else None
    t_end = ended.t if ended else None
    choice_times = trace.chunk_t
    t_first, t_last, deltas = _first_last_token_times(trace)

    n: int | None = None
    if ended is not None and ended.completion_tokens is not None and ended.completion_tokens >= 0:
        n = ended.completion_tokens
    elif trace.last_cum is not None:
        n = trace.last_cum

    ttft = choice_times[0] - t_send if choice_times and t_send is not None else None
    e2el = t_end - t_send if t_end is not None and t_send is not None else None
    tpot = None
    if e2el is not None and ttft is not None and n is not None and n > 1:
        tpot = (e2el - ttft) / (n - 1)
    decode = None
    partial = started is None and ended is not None
    if partial:
        span = (t_last - t_first) if t_first is not None and t_last is not None else 0.0
        recorded = sum(deltas) - deltas[0] if deltas else 0
        decode = recorded / span if recorded > 0 and span > 0 else None
    elif n is not None and n >= 2 and t_first is not None and t_last is not None:
        span = t_last - t_first
        decode = (n - 1) / span if span > 0 else None
    e2e = None
    if n is not None and e2el is not None and e2el > 0:
        e2e = n / e2el
    itl = tuple(b - a for a, b in itertools.pairwise(choice_times))

    decode_deltas = deltas[1:]
    merged: int | None = None
    # The final step is cut by max_tokens or the stop token (its drafts past the end are dropped):
    # it says nothing about acceptance.
    counted = decode_deltas[:-1] if trace.final_cut else decode_deltas
    if n_spec is not None and n_spec >= 0:
        limit = n_spec + 1
        merged = sum(1 for d in decode_deltas if d > limit)
        counted = [d for d in counted if d <= limit]
    client_al = sum(counted) / len(counted) if counted else None
    server_spec, server_note = validate_server_spec(ended.spec_decoding if ended else None)
    timing = parse_server_timing(ended.server_timing if ended else None)

    return RequestStats(
        request_id=trace.request_id,
        outcome=ended.outcome if ended else "running",
        error=ended.error if ended else None,
        t_send=t_send,
        t_end=t_end,
        completion_tokens=n,
        prompt_tokens=ended.prompt_tokens if ended else None,
        max_tokens=started.max_tokens if started else None,
        ttft_s=ttft,
        e2el_s=e2el,
        tpot_s=tpot,
        decode_tok_s=decode,
        e2e_tok_s=e2e,
        itl_s=itl,
        chunk_tokens=tuple(deltas),
        decode_chunks=len(decode_deltas),
        merged_chunks=merged,
        single_token_chunks=sum(1 for d in decode_deltas if d == 1),
        client_acceptance_length=client_al,
        server_spec=server_spec,
        t_first_token=t_first,
        t_last_token=t_last,
        server_spec_note=server_note,
        counted_chunk_tokens=tuple(counted),
        server_timing=timing,
        ttft_split=ttft_split(ttft, timing),
        partial=partial,
    )
