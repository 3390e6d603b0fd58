"""The /metrics scraper: polls a vLLM server's Prometheus page and emits what it read.

Every scrape is bounded (sources/http_read.py): one deadline over the whole request and body
(`deadline`, default the `timeout`: 5 s), and a size cap enforced while the body streams in
(reading stops past the cap); at most 5 redirects. Pages are parsed by core.metrics_page (only
the families specmon reads). The scraper also tracks the server's state and emits
ServerStatusChanged on every change:

- up: the last scrape succeeded;
- stale: no success for more than `stale_after` seconds (the last data is kept);
- down: connection refused, `down_after` failures in a row, or any failure of a server never
  read yet (so a server that never answers is listed, with why, after one deadline);
- unreadable: the server answers but the page cannot be read ("metrics unreadable: ...").

`scrape_until_generation` is the end-of-request helper: it polls until the server's generation
token counter has grown by the request's completion tokens (bounded attempts), so that the
per-request /metrics deltas are complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import httpx

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import (
    Emit,
    MetricSample,
    MetricsScraped,
    ServerStatus,
    ServerStatusChanged,
)
from specmon.core.families import GENERATION_TOKENS, MAX_PAGE_BYTES
from specmon.core.metrics_page import MetricsUnreadable, parse_metrics_page
from specmon.core.redaction import redact_text, redact_url
from specmon.sources.http_errors import describe_error
from specmon.sources.http_read import (
    MAX_REDIRECTS,
    HttpReadError,
    HttpStatus,
    HttpTooLarge,
    read_answer,
)
from specmon.sources.tls import verifying_context

Sleep = Callable[[float], Awaitable[None]]


DEFAULT_MAX_BYTES = MAX_PAGE_BYTES
"""Size cap of a /metrics page. A vLLM page is ~60 KB; 8 MiB leaves room for many engines."""


def metrics_url_for(base_url: str) -> str:
    """The /metrics address of a server base URL (`http://host:8000` → `…/metrics`)."""
    return base_url.rstrip("/") + "/metrics"


def generation_tokens(samples: tuple[MetricSample, ...]) -> float | None:
    """The server's generated-token counter summed over engines (None when absent)."""
    values = [s.value for s in samples if s.name == GENERATION_TOKENS]
    return sum(values) if values else None


class _Unreadable(Exception):
    """The server answered, but not with a readable page."""


class MetricsScraper:
    """Scrapes one /metrics URL and emits MetricsScraped and ServerStatusChanged events.

    `source` names the server in events (its base URL); `url` is where its /metrics page is,
    which may be another address (a proxy or sidecar: `--metrics-url`).
    """

    def __init__(
        self,
        url: str,
        *,
        source: str | None = None,
        clock: Clock = monotonic_clock,
        interval: float = 1.0,
        timeout: float = 5.0,
        deadline: float | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        stale_after: float | None = None,
        down_after: int = 5,
        headers: Mapping[str, str] | None = None,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"scrape interval must be positive, got {interval}")
        self.url = url
        self.source = source or redact_url(url) or url
        self._clock = clock
        self.interval = interval
        self._max_bytes = max_bytes
        self.deadline_s = deadline if deadline is not None else timeout
        """Bound on one whole scrape (connect, headers, body), whatever the server does."""
        self._what = urlsplit(url).path or "/"
        """What a message says was read: the page's path (never the address: it may hold
        credentials)."""
        self._stale_after = stale_after if stale_after is not None else 3 * interval
        self._down_after = down_after
        self._sleep = sleep
        auth = dict(headers or {})
        self._secrets = tuple(v.split()[-1] for v in auth.values() if v.strip())
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            verify=verifying_context(),
            headers=auth,
            transport=transport,
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
        )
        self.status: ServerStatus | None = None
        self.detail = ""
        self.failures = 0
        self.last_success: float | None = None
        self.last: MetricsScraped | None = None

    async def aclose(self) -> None:
        await self._client.aclose()

    def _set_status(self, t: float, status: ServerStatus, detail: str, emit: Emit) -> None:
        if status != self.status or (status != "up" and detail != self.detail):
            self.status = status
            self.detail = detail
            emit(ServerStatusChanged(t=t, source=self.source, status=status, detail=detail))

    async def _fetch(self) -> tuple[float, str]:
        """GET the page within the deadline; returns (arrival time, text). Raises _Unreadable,
        HttpReadError or httpx.ConnectError."""
        try:
            answer = await read_answer(
                self._client,
                self.url,
                what=self._what,
                deadline_s=self.deadline_s,
                max_bytes=self._max_bytes,
                accept=lambda status: status < 300,
            )
        except HttpStatus as exc:
            if exc.status >= 500:  # the server is there but failing: counts toward down
                raise
            raise _Unreadable(f"HTTP {exc.status} from {self.source} metrics address") from None
        except HttpTooLarge:
            raise _Unreadable(f"page larger than the cap of {self._max_bytes} bytes") from None
        t = self._clock()  # arrival of the whole page, before parsing
        return t, answer.text()

    async def scrape_once(self, emit: Emit) -> MetricsScraped | None:
        """One scrape: emits the samples (or a status change) and returns the scrape or None.
        Never raises for anything the server does (bounded by `deadline_s`)."""
        try:
            t, text = await self._fetch()
        except _Unreadable as exc:
            self.failures = 0
            self._set_status(self._clock(), "unreadable", f"metrics unreadable: {exc}", emit)
            return None
        except httpx.ConnectError as exc:
            self.failures += 1
            self._set_status(self._clock(), "down", self._describe(exc), emit)
            return None
        except (HttpReadError, httpx.HTTPError, OSError) as exc:
            self.failures += 1
            now = self._clock()
            detail = self._describe(exc)
            if self.failures >= self._down_after:
                self._set_status(now, "down", f"{self.failures} failures in a row: {detail}", emit)
            elif self.status in (None, "down"):
                # Never read (or down already): say why now rather than after N failures.
                self._set_status(now, "down", detail, emit)
            elif (
                self.status in ("up", "stale")
                and self.last_success is not None
                and now - self.last_success > self._stale_after
            ):
                self._set_status(now, "stale", detail, emit)
            return None
        try:
            samples = parse_metrics_page(text)
        except MetricsUnreadable as exc:
            self.failures = 0
            self._set_status(t, "unreadable", self._clean(str(exc)), emit)
            return None
        self.failures = 0
        self.last_success = t
        self._set_status(t, "up", "", emit)
        scraped = MetricsScraped(t=t, source=self.source, samples=samples)
        self.last = scraped
        emit(scraped)
        return scraped

    async def run(self, emit: Emit) -> None:
        """Scrape every `interval` seconds until cancelled."""
        while True:
            started = self._clock()
            await self.scrape_once(emit)
            spent = self._clock() - started
            await self._sleep(max(0.0, self.interval - spent))

    async def scrape_until_generation(
        self,
        emit: Emit,
        *,
        baseline: float | None,
        expected_tokens: int,
        attempts: int = 20,
        delay: float = 0.05,
    ) -> MetricsScraped | None:
        """Scrape until the generation counter grew by `expected_tokens` since `baseline`.

        Returns the first scrape where the delta matches (or exceeds: other traffic), or the last
        scrape after `attempts` tries, or None when no scrape succeeded. A counter below the
        baseline (server restart) ends the wait at once.
        """
        last: MetricsScraped | None = None
        for attempt in range(max(1, attempts)):
            scraped = await self.scrape_once(emit)
            if scraped is not None:
                last = scraped
                current = generation_tokens(scraped.samples)
                if baseline is None or current is None:
                    return scraped
                if current < baseline or current - baseline >= expected_tokens:
                    return scraped
            if attempt + 1 < attempts:
                await self._sleep(delay)
        return last

    def _describe(self, exc: BaseException) -> str:
        return describe_error(exc, source=self.source, secrets=self._secrets)

    def _clean(self, text: str) -> str:
        return redact_text(text, self._secrets)
