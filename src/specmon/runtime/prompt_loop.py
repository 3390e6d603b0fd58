"""A loop of sequential chat requests (the demo's traffic), with end-of-request scrapes.

Requests run one at a time (concurrency 1), so the /metrics deltas around each request belong to
it: a scrape right before the request gives the baseline, and after the request the scraper polls
until the generation counter grew by the request's completion tokens.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from specmon.core.events import Emit, RequestEnded
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens
from specmon.sources.stream_client import ChatRequest, StreamClient, new_request_id


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
    ended = await client.chat(request, emit, request_id=request_id)
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
