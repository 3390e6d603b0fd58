"""The canary probe loop: one fixed greedy request now and then, judged against a learned AL.

`CanaryProbe` watches one server. `observe` (subscribed to the hub) keeps the server's latest
/metrics counters; `run(emit)` (a hub source) checks every `check_s` whether a probe is due: the
interval has passed since the last one and live traffic generated tokens since then
(core.canary.should_probe: an idle server is never probed). A probe streams the canary request
through the stream client, its events kept to itself (the canary is not one of the session's
answers), and emits one CanaryProbed with its AL (the server's per-request AL when the server
gives it, else the client's chunk AL) and the baseline it was judged by. The first LEARN_PROBES
probes of a server+model+draft+method+K teach the baseline, which is stored (sources.canary_store)
for later sessions. A store that cannot be read or written costs the persistence only: the
baseline is then learned in memory, and the first event says why; so does a stored entry the
store skipped (an AL that is not one: the baseline is learned again). Every AL the probe measures
(the canary's, the live traffic's) is held to the store's own rule (core.canary.al_problem)
before it is judged or learned: one that is not an AL for the key's K is never kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specmon.core.canary import (
    CANARY_MAX_TOKENS,
    CANARY_PROMPT,
    CANARY_TEMPERATURE,
    CanaryBaseline,
    CanaryKey,
    LiveTraffic,
    Totals,
    al_problem,
    live_since,
    should_probe,
    totals_of,
)
from specmon.core.clock import Clock
from specmon.core.events import (
    CanaryProbed,
    Emit,
    Event,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    StreamChunk,
)
from specmon.core.redaction import redact_url
from specmon.core.stream_stats import RequestTrace, request_stats
from specmon.runtime.monitor import Monitor
from specmon.sources.canary_store import CanaryStore, CanaryStoreError
from specmon.sources.stream_client import ChatRequest, StreamClient

DEFAULT_CHECK_S = 2.0
"""How often the loop looks whether a probe is due (cheap: no request unless due)."""

Sleeper = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Own:
    """The canary's own share of the counters (taken out of the live traffic)."""

    tokens: int = 0
    drafts: int = 0
    accepted: int = 0


class CanaryProbe:
    """The canary of one server (see the module docstring)."""

    def __init__(
        self,
        client: StreamClient,
        key: CanaryKey,
        *,
        interval_s: float,
        clock: Clock,
        store: CanaryStore | None = None,
        check_s: float = DEFAULT_CHECK_S,
        sleep: Sleeper = asyncio.sleep,
        relearn: bool = False,
    ) -> None:
        self.client = client
        self.key = key
        self.source = client.source
        self.interval_s = interval_s
        self.clock = clock
        self.store = store
        self.check_s = check_s
        self.sleep = sleep
        self.relearn = relearn
        """Learn the baseline again from this session's probes (the stored one is replaced)."""
        self.latest: Totals | None = None
        self._at_last: Totals | None = None
        self._own = _Own()
        self._last_t: float | None = None
        self._baseline: CanaryBaseline | None = None
        self._pending_note: str | None = None
        self.skipped_idle = 0
        """Checks that found the interval passed but no live traffic (the server left alone)."""

    # ------------------------------------------------------------ counters (hub thread)

    def observe(self, event: Event) -> None:
        """Keep the latest counters of this server (a hub subscriber)."""
        if isinstance(event, MetricsScraped) and event.source == self.source:
            self.latest = totals_of(event.samples)
            if self._at_last is None:
                self._at_last = self.latest  # live traffic counts from the first reading

    def live(self) -> LiveTraffic:
        if self.latest is None:
            return LiveTraffic(None, None)
        own = self._own
        return live_since(
            self._at_last,
            self.latest,
            canary_tokens=own.tokens,
            canary_drafts=own.drafts,
            canary_accepted=own.accepted,
        )

    # ------------------------------------------------------------ the loop

    async def run(self, emit: Emit) -> None:
        """Probe when due, until cancelled."""
        while True:
            await self.sleep(self.check_s)
            await self.tick(emit)

    async def tick(self, emit: Emit) -> CanaryProbed | None:
        """One check: probe when due (returns the event), else None."""
        now = self.clock()
        since = None if self._last_t is None else now - self._last_t
        live = self.live()
        due, why = should_probe(live, since_last_s=since, interval_s=self.interval_s)
        if not due:
            if why.startswith("idle") and (since is None or since >= self.interval_s):
                self.skipped_idle += 1
            return None
        return await self.probe(emit, live)

    async def probe(self, emit: Emit, live: LiveTraffic) -> CanaryProbed:
        """Send the canary now and emit its CanaryProbed."""
        baseline = await self._load()
        live = self._checked_live(live)
        self._at_last = self.latest
        events: list[Event] = []
        request = ChatRequest(
            CANARY_PROMPT,
            model=self.key.model or None,
            max_tokens=CANARY_MAX_TOKENS,
            temperature=CANARY_TEMPERATURE,
        )
        ended = await self.client.chat(request, events.append, request_id="canary")
        self._last_t = self.clock()
        trace = RequestTrace("canary")
        for e in events:
            if isinstance(e, RequestStarted | StreamChunk | RequestEnded):
                trace.add(e)
        stats = request_stats(trace, n_spec=self.key.n_spec)
        spec = stats.server_spec
        al = spec.mean_acceptance_length if spec is not None else None
        if al is None:
            al = stats.client_acceptance_length
        self._own = _Own(
            tokens=stats.completion_tokens or 0,
            drafts=(spec.num_spec_steps or 0) if spec else 0,
            accepted=(spec.num_accepted_draft_tokens or 0) if spec else 0,
        )
        error = ended.error
        if ended.outcome == "ok" and al is None:
            error = "the canary's answer gave no acceptance length (no usage numbers?)"
        elif al is not None and (why := al_problem(al, self.key.n_spec)) is not None:
            al, error = None, f"the canary's acceptance length was {why}; not judged"
        if self._pending_note is not None:
            error = self._pending_note if error is None else f"{error}; {self._pending_note}"
            self._pending_note = None
        event = CanaryProbed(
            t=self._last_t,
            source=self.source,
            outcome=ended.outcome if al is not None or ended.outcome != "ok" else "failed",
            acceptance_length=al,
            completion_tokens=stats.completion_tokens,
            expected_al=baseline.expected_al if baseline.learned else None,
            tolerance=baseline.tolerance,
            learned_probes=baseline.agreeing,
            live_acceptance_length=live.acceptance_length,
            live_reference=baseline.live_reference,
            error=error,
        )
        emit(event)
        if event.outcome == "ok" and al is not None:
            updated = baseline.with_probe(al, live.acceptance_length)
            if updated != baseline:
                self._baseline = updated
                await self._save(updated)
        return event

    def _checked_live(self, live: LiveTraffic) -> LiveTraffic:
        """`live` without its AL when that is not an AL for the key's K (garbage counters): it
        is neither shown, judged nor learned, and the probe's event says why."""
        al = live.acceptance_length
        why = al_problem(al, self.key.n_spec) if al is not None else None
        if why is None:
            return live
        self._note(f"live acceptance length from /metrics ignored: {why}")
        return LiveTraffic(live.tokens, None)

    def _note(self, note: str) -> None:
        self._pending_note = note if self._pending_note is None else f"{self._pending_note}; {note}"

    # ------------------------------------------------------------ the store

    async def _load(self) -> CanaryBaseline:
        if self._baseline is None:
            self._baseline = CanaryBaseline()
            if self.relearn:
                self._note("learning the canary baseline again (asked to relearn)")
            elif self.store is not None:
                try:
                    self._baseline = await asyncio.to_thread(self.store.get, self.key)
                except CanaryStoreError as exc:
                    self._note(f"canary baseline learned in memory only: {exc}")
                    self.store = None
                else:
                    self._note_skipped(self.store.skipped)
        return self._baseline

    def _note_skipped(self, skipped: dict[str, str]) -> None:
        """One line when the store skipped entries: never a silent relearning."""
        if not skipped:
            return
        own = skipped.get(self.key.id())
        if own is not None:
            note = f"stored canary baseline refused, learned again: {own}"
        else:
            note = f"stored canary entry skipped: {next(iter(skipped.values()))}"
        if len(skipped) > 1:
            note += f" (and {len(skipped) - 1} more entries)"
        self._note(note + "; skipped entries are dropped when the file is next written")

    async def _save(self, baseline: CanaryBaseline) -> None:
        if self.store is None:
            return
        try:
            await asyncio.to_thread(self.store.put, self.key, baseline)
        except CanaryStoreError as exc:
            self._note(f"canary baseline learned in memory only: {exc}")
            self.store = None


def canary_key(monitor: Monitor, index: int) -> CanaryKey:
    """The key of server number `index` of a started monitor: its base URL (credentials
    removed), the model it lists first, and the session's drafter, method and K (those only
    when it watches this one server: they are the session's, not per server)."""
    client = monitor.clients[index]
    identity = monitor.identities[index] if index < len(monitor.identities) else None
    info = monitor.info
    alone = len(monitor.clients) == 1 and info is not None
    model = identity.models[0] if identity is not None and identity.models else None
    if model is None and alone and info is not None:
        model = info.model
    n_spec = identity.n_spec if identity is not None else None
    if n_spec is None and alone and info is not None:
        n_spec = info.n_spec
    return CanaryKey(
        server=redact_url(client.base_url) or client.base_url,
        model=model or "",
        draft=info.draft_model if alone and info is not None else None,
        method=info.method if alone and info is not None else None,
        n_spec=n_spec,
    )


def start_canaries(
    monitor: Monitor,
    interval_s: float,
    *,
    store: CanaryStore | None = None,
    check_s: float = DEFAULT_CHECK_S,
    relearn: bool = False,
) -> list[CanaryProbe]:
    """Start one canary per attached server of a started monitor (until monitor.stop()).
    `store` None: the default file under XDG data; `relearn`: the stored baselines are learned
    again from this session's probes (and replaced once learned)."""
    if monitor.info is None:
        raise RuntimeError("the monitor is not started")
    store = store if store is not None else CanaryStore()
    probes = []
    for index, client in enumerate(monitor.clients):
        probe = CanaryProbe(
            client,
            canary_key(monitor, index),
            interval_s=interval_s,
            clock=monitor.hub.clock,
            store=store,
            check_s=check_s,
            relearn=relearn,
        )
        monitor.hub.subscribe(probe.observe)
        monitor.run_source(probe.run)
        probes.append(probe)
    return probes
