"""Helpers of the real tier's measuring tests: vLLM's periodic SpecDecoding log lines, and one
request run with /metrics scraped before and after it (the counters of exactly that request)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.real_vllm.server import VllmServer

from specmon.core.events import Event, MetricsScraped, RequestEnded
from specmon.core.log_lines import SpecDecodingLog, parse_spec_decoding_line
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens, metrics_url_for
from specmon.sources.stream_client import ChatRequest, StreamClient

LOG_WAIT_S = 60.0  # bound on waiting for vLLM's periodic log line (printed about every second)


# ------------------------------------------------------------------ vLLM's log lines


def spec_log_lines(path: Path) -> list[SpecDecodingLog]:
    """Every "SpecDecoding metrics" line the server printed since it started, in order."""
    text = path.read_text(errors="replace")
    parsed = (parse_spec_decoding_line(line) for line in text.splitlines())
    return [p for p in parsed if p is not None]


def drafted_total(lines: list[SpecDecodingLog]) -> int:
    return sum(line.drafted_tokens or 0 for line in lines)


def wait_log_drafted(path: Path, total: float) -> list[SpecDecodingLog]:
    """The log's lines once their Drafted sum has reached `total` (the /metrics counter)."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        lines = spec_log_lines(path)
        if drafted_total(lines) >= total or time.monotonic() > deadline:
            return lines
        time.sleep(0.25)


def lines_between(lines: list[SpecDecodingLog], start: float, end: float) -> list[SpecDecodingLog]:
    """The lines whose cumulative Drafted count runs from exactly `start` to exactly `end`."""
    cumulative = 0
    first: int | None = 0 if start == 0 else None
    for i, line in enumerate(lines):
        cumulative += line.drafted_tokens or 0
        if cumulative == start:
            first = i + 1
        if cumulative == end:
            assert first is not None, f"no log line ends at the request's start ({start} drafted)"
            return lines[first : i + 1]
    raise AssertionError(f"no log line boundary at {start} and {end} drafted tokens")


def counter(samples: MetricsScraped, name: str) -> float:
    return sum(s.value for s in samples.samples if s.name == name)


DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"


# ------------------------------------------------------------------ one request, three ways


async def scrape(scraper: MetricsScraper, emit: list[Event]) -> MetricsScraped:
    scraped = await scraper.scrape_once(emit.append)
    assert scraped is not None, f"/metrics not readable: {scraper.status} {scraper.detail}"
    return scraped


async def run_request(
    server: VllmServer, request: ChatRequest, events: list[Event]
) -> tuple[MetricsScraped, RequestEnded, MetricsScraped]:
    scraper = MetricsScraper(metrics_url_for(server.url), source=server.url)
    try:
        before = await scrape(scraper, events)
        # Everything counted before the request is in the log already: its lines end at `before`.
        await asyncio.to_thread(wait_log_drafted, server.log_path, counter(before, DRAFT_TOKENS))
        async with StreamClient(server.url) as client:
            ended = await client.chat(request, events.append)
        assert ended.outcome == "ok", ended.error
        assert ended.completion_tokens is not None
        after = await scraper.scrape_until_generation(
            events.append,
            baseline=generation_tokens(before.samples),
            expected_tokens=ended.completion_tokens,
        )
        assert after is not None
    finally:
        await scraper.aclose()
    return before, ended, after
