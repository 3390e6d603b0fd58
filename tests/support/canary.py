"""The canary's rounds against a server (the simulator's tests and the real vLLM's): live traffic,
scrapes and canary ticks, as watch's hub interleaves them."""

from __future__ import annotations

import time

from specmon.core.canary import CanaryKey
from specmon.core.events import Event
from specmon.runtime.canary import CanaryProbe
from specmon.sources.canary_store import CanaryStore
from specmon.sources.metrics_scraper import MetricsScraper, metrics_url_for
from specmon.sources.stream_client import ChatRequest, StreamClient


async def canary_rounds(
    url: str,
    store: CanaryStore,
    key: CanaryKey,
    rounds: int,
    *,
    live: bool = True,
    model: str | None = None,
    relearn: bool = False,
) -> list[Event]:
    """`rounds` times: one live request (unless not `live`), a scrape, one canary tick, a scrape;
    the events the canary emitted."""
    out: list[Event] = []
    async with StreamClient(url) as client:
        scraper = MetricsScraper(metrics_url_for(url), source=client.source)
        probe = CanaryProbe(client, key, interval_s=0.0, clock=time.monotonic, store=store)
        probe.relearn = relearn

        async def scrape() -> None:
            scraped = await scraper.scrape_once(lambda _e: None)
            assert scraped is not None
            probe.observe(scraped)

        try:
            await scrape()
            for _ in range(rounds):
                if live:
                    await client.chat(
                        ChatRequest("live traffic", model=model, max_tokens=16), lambda _e: None
                    )
                await scrape()
                await probe.tick(out.append)
                await scrape()
        finally:
            await scraper.aclose()
    return out
