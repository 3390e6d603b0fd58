"""A loop of sequential chat requests (the demo's traffic), with end-of-request scrapes.

Requests run one at a time (concurrency 1), so the /metrics deltas around each request belong to
it: a scrape right before the request gives the baseline, and after the request the scraper polls
until the generation counter grew by the request's completion tokens.

A chat request with `drop_on_overflow` that the server refuses because its context is too long
(HTTP 400, core.context_overflow, before any token) is resent without the oldest turn of its
conversation, as many times as it has turns: it stays ONE request. Its first attempt's
RequestStarted is passed on at once; a refused attempt's end is not (it is no failed answer),
nor is a resent attempt's start; the final end carries the number of turns left out
(`RequestEnded.dropped_turns`), for the chat to name them.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from specmon.core.context_overflow import is_context_overflow
from specmon.core.events import Emit, Event, RequestEnded, RequestStarted, StreamChunk
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens
from specmon.sources.stream_client import ChatRequest, StreamClient, new_request_id


class _Attempt:
    """The emit of one attempt of a request that may be resent (see the module docstring): a
    resent attempt's RequestStarted is not passed on (the request started once), nor is an
    end that will be resent; the final end carries the number of turns left out."""

    def __init__(self, emit: Emit, dropped_turns: int, may_resend: bool) -> None:
        self.emit = emit
        self.dropped_turns = dropped_turns
        self.may_resend = may_resend
        self.streamed = False

    def resends(self, ended: RequestEnded) -> bool:
        """Whether this attempt's end is a context overflow that is resent."""
        return self.may_resend and not self.streamed and is_context_overflow(ended)

    def __call__(self, event: Event) -> None:
        if isinstance(event, RequestStarted):
            if self.dropped_turns:
                return  # the request started with its first attempt
        elif isinstance(event, StreamChunk):
            self.streamed = True
        elif isinstance(event, RequestEnded):
            if self.resends(event):
                return
            if self.dropped_turns:
                event = replace(event, dropped_turns=self.dropped_turns)
        self.emit(event)


async def chat_dropping_on_overflow(
    client: StreamClient, request: ChatRequest, emit: Emit, *, request_id: str | None = None
) -> RequestEnded:
    """`client.chat`, resent without the oldest turn while the server says the context is too
    long and `request.drop_on_overflow` allows it (see the module docstring)."""
    if not request.drop_on_overflow:
        return await client.chat(request, emit, request_id=request_id)
    rid = request_id or new_request_id()
    messages, dropped = request.messages, 0
    while True:
        attempt = _Attempt(emit, dropped, may_resend=len(messages) >= 2)
        ended = await client.chat(replace(request, messages=messages), attempt, request_id=rid)
        if not attempt.resends(ended):
            return replace(ended, dropped_turns=dropped) if dropped else ended
        messages, dropped = messages[2:], dropped + 1  # a question and its answer


async def run_request(
    client: StreamClient,
    request: ChatRequest,
    emit: Emit,
    *,
    scraper: MetricsScraper | None = None,
    request_id: str | None = None,
) -> RequestEnded:
    """One request with a baseline scrape before it and a settled scrape after it."""
    baseline: float | None = None
    if scraper is not None:
        before = await scraper.scrape_once(emit)
        baseline = generation_tokens(before.samples) if before is not None else None
    ended = await chat_dropping_on_overflow(client, request, emit, request_id=request_id)
    if scraper is not None and ended.completion_tokens:
        await scraper.scrape_until_generation(
            emit, baseline=baseline, expected_tokens=ended.completion_tokens
        )
    return ended


async def prompt_loop(
    client: StreamClient,
    requests: Sequence[ChatRequest],
    emit: Emit,
    *,
    scraper: MetricsScraper | None = None,
    count: int | None = None,
    name_requests: bool = False,
) -> list[RequestEnded]:
    """Send `requests` in turn (cycling), `count` in all (None: until cancelled).

    Returns the RequestEnded events (the last 1000). Model names are resolved once, up front.
    `name_requests` sends each request's session id as vLLM's `request_id` body field, so the
    server's own records (the simulator's truth file) name it as the session does.
    """
    if not requests:
        raise ValueError("the prompt loop needs at least one request")
    model = await client.resolve_model(requests[0].model)
    ended: deque[RequestEnded] = deque(maxlen=1000)
    cycle = itertools.cycle(requests)
    numbers = itertools.count(1) if count is None else range(1, count + 1)
    for _ in numbers:
        request = next(cycle)
        if request.model is None:
            request = replace(request, model=model)
        rid = None
        if name_requests:
            rid = new_request_id()
            request = replace(request, extra_body={**(request.extra_body or {}), "request_id": rid})
        result = await run_request(client, request, emit, scraper=scraper, request_id=rid)
        ended.append(result)
    return list(ended)
