"""The fleet source: reads every vLLM target a Prometheus scrapes, through its HTTP API.

One read (`read_once`) is at most four requests, whatever the number of targets:
`/api/v1/targets` (falling back to an `up{…}` query where it is not served), one tagged instant
query with every number of every target (core.promql), one for dcgm-exporter GPU series, and,
when due, one tagged range query for the history (the last hour). It emits one `FleetSampled`.
Each request is bounded as a whole (sources/http_read.py: `timeout` seconds for the request and
its answer, `MAX_ANSWER_BYTES`). When the Prometheus is down, slow, trickles
or answers errors, the event carries `error`
and the state keeps the last values marked stale; the next read retries.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.events import Emit, FleetHistory, FleetSampled, FleetTarget
from specmon.core.promql import (
    Key,
    Matcher,
    PromAnswerError,
    TargetListing,
    dcgm_expression,
    fleet_expressions,
    fleet_history,
    fleet_targets,
    history_expressions,
    parse_match,
    selector_text,
    tagged,
    targets_of,
    targets_of_up,
)
from specmon.core.redaction import redact_text, redact_url
from specmon.sources.http_errors import describe_error
from specmon.sources.http_read import HttpReadError, read_answer

Sleep = Callable[[float], Awaitable[None]]
WallClock = Callable[[], float]

DEFAULT_INTERVAL_S = 5.0
DEFAULT_RATE_WINDOW_S = 60.0
DEFAULT_HISTORY_S = 3600.0
DEFAULT_HISTORY_EVERY_S = 300.0
MAX_ANSWER_BYTES = 32 * 1024 * 1024
"""Largest API answer read (a range answer for many targets is the largest)."""


class PrometheusFleet:
    """Reads a Prometheus for the vLLM targets it scrapes (see the module docstring).

    `rate_window_s` is the PromQL `rate()` window (at least four of the Prometheus's scrape
    intervals, as Grafana's `$__rate_interval` is); `history_s` how far back a range read goes and
    `history_every_s` how often it is repeated (a new target triggers one at once).
    """

    def __init__(
        self,
        url: str,
        *,
        match: str | None = None,
        clock: Clock = monotonic_clock,
        wall: WallClock = time.time,
        interval: float = DEFAULT_INTERVAL_S,
        rate_window_s: float = DEFAULT_RATE_WINDOW_S,
        history_s: float = DEFAULT_HISTORY_S,
        history_step_s: float | None = None,
        history_every_s: float = DEFAULT_HISTORY_EVERY_S,
        timeout: float = 5.0,
        gpus: bool = True,
        headers: Mapping[str, str] | None = None,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the read interval must be positive, got {interval}")
        if rate_window_s <= 0:
            raise ValueError(f"the rate window must be positive, got {rate_window_s}")
        self.url = url.rstrip("/")
        self.source = redact_url(self.url) or self.url
        self.matchers: tuple[Matcher, ...] = parse_match(match)
        self._clock = clock
        self._wall = wall
        self.interval = interval
        self.rate_window_s = rate_window_s
        self.history_s = history_s
        self.history_step_s = history_step_s or max(history_s / 240.0, 1.0)
        self.history_every_s = history_every_s
        self._gpus = gpus
        self._sleep = sleep
        auth = dict(headers or {})
        self._secrets = tuple(v.split()[-1] for v in auth.values() if v.strip())
        self._deadline_s = timeout
        """Bound on each API request as a whole (request, headers and answer)."""
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers=auth,
            transport=transport,
        )
        self._query = tagged(fleet_expressions(self.matchers, rate_window_s))
        self._history_query = tagged(history_expressions(self.matchers, rate_window_s))
        self._targets_api = True
        self._known: set[Key] = set()
        self._history_t: float | None = None
        self.failures = 0
        self.last: FleetSampled | None = None

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        try:
            answer = await read_answer(
                self._client,
                self.url + path,
                what=path,
                deadline_s=self._deadline_s,
                max_bytes=MAX_ANSWER_BYTES,
                params=params,
            )
        except HttpReadError as exc:
            raise PromAnswerError(str(exc)) from None
        if answer.status == 404 and path == "/api/v1/targets":
            raise _NoTargetsApi()
        try:
            payload = json.loads(answer.body)
        except ValueError:
            raise PromAnswerError(f"HTTP {answer.status}, not a JSON answer") from None
        if answer.status != 200 and not (
            isinstance(payload, dict) and payload.get("status") == "error"
        ):
            raise PromAnswerError(f"HTTP {answer.status}")
        return payload

    async def _listing(self) -> list[TargetListing]:
        if self._targets_api:
            try:
                return targets_of(
                    await self._get("/api/v1/targets", {"state": "active"}), self.matchers
                )
            except _NoTargetsApi:
                self._targets_api = False
        query = f"up{{{selector_text(self.matchers)}}}"
        return targets_of_up(await self._get("/api/v1/query", {"query": query}))

    async def _history(self) -> list[FleetHistory]:
        end = self._wall()
        payload = await self._get(
            "/api/v1/query_range",
            {
                "query": self._history_query,
                "start": f"{end - self.history_s:.3f}",
                "end": f"{end:.3f}",
                "step": f"{self.history_step_s:g}",
            },
        )
        return fleet_history(payload, end, self.history_step_s)

    async def read_once(self, emit: Emit) -> FleetSampled:
        """One read of the Prometheus; emits and returns the event."""
        try:
            listing, payload = await asyncio.gather(
                self._listing(), self._get("/api/v1/query", {"query": self._query})
            )
            dcgm = None
            if self._gpus:
                dcgm = await self._get("/api/v1/query", {"query": dcgm_expression()})
            targets = fleet_targets(payload, listing, self._known, dcgm)
            now = self._clock()
            keys = {(x.instance, x.job) for x in targets}
            history: list[FleetHistory] = []
            if targets and (
                self._history_t is None
                or not keys <= self._known
                or now - self._history_t >= self.history_every_s
            ):
                history = await self._history()
                self._history_t = now
            self._known = keys
            event = FleetSampled(
                t=self._clock(),
                source=self.source,
                rate_window_s=self.rate_window_s,
                targets=tuple(_clean_target(x, self._clean) for x in targets),
                history=tuple(h for h in history if (h.instance, h.job) in keys),
            )
            self.failures = 0
        except (httpx.HTTPError, OSError, PromAnswerError, ValueError, TypeError, KeyError) as exc:
            # ValueError/TypeError/KeyError: an answer of an unexpected shape; the loop goes on.
            self.failures += 1
            event = FleetSampled(
                t=self._clock(),
                source=self.source,
                rate_window_s=self.rate_window_s,
                targets=(),
                error=self._describe(exc),
            )
        self.last = event
        emit(event)
        return event

    async def run(self, emit: Emit) -> None:
        """Read every `interval` seconds until cancelled (a failed read is retried next time)."""
        while True:
            started = self._clock()
            await self.read_once(emit)
            spent = self._clock() - started
            await self._sleep(max(0.0, self.interval - spent))

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, PromAnswerError):
            return self._clean(" ".join(f"{self.source}: {exc}".split()))
        if isinstance(exc, ValueError | TypeError | KeyError):
            text = f"{self.source}: unreadable answer ({type(exc).__name__}: {exc})"
            return self._clean(" ".join(text.split()))
        return describe_error(exc, source=self.source, secrets=self._secrets)

    def _clean(self, text: str) -> str:
        return redact_text(text, self._secrets)


class _NoTargetsApi(Exception):
    """The Prometheus (or what stands in for it) does not serve /api/v1/targets."""


def _clean_target(x: FleetTarget, clean: Callable[[str], str]) -> FleetTarget:
    if not x.last_error and not x.url:
        return x
    return replace(
        x,
        last_error=clean(x.last_error),
        url=redact_url(x.url) if x.url else x.url,
    )
