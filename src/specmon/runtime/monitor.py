"""A monitoring session: the hub, a session state, an optional recorder and the sources.

Used by `specmon watch` and `specmon demo`: it identifies each attached server (/version,
/v1/models), takes a first GPU sample (so the session's GPU is known), builds the SessionInfo
(simulated or not), subscribes the state (and the recorder) to the hub, and starts one /metrics
scraper per server and the GPU sampler. The UI reads `view()` (the published SessionView) at
its own rate; nothing here waits on the UI.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from specmon.core.credentials import KeyScope
from specmon.core.events import Event, GpuSampled, RequestEnded, ServerStatusChanged, SessionInfo
from specmon.core.recording_format import RecordedBaseline
from specmon.core.redaction import compile_redactions, url_secrets
from specmon.core.server_identities import IDENTITIES_KEY, identities_extra
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.core.views import SessionView
from specmon.runtime.baseline import recorded_baseline
from specmon.runtime.hub import Hub, SourceRun
from specmon.runtime.prompt_loop import prompt_loop
from specmon.runtime.recorder import Recorder
from specmon.sources.gpu.loop import GpuSampler, run_sampler
from specmon.sources.metrics_scraper import MetricsScraper, metrics_url_for
from specmon.sources.server_identity import ServerIdentity, identify, server_base
from specmon.sources.stream_client import ChatRequest, StreamClient


class State(Protocol):
    """What the monitor needs of a session state (core.session_state.SessionState)."""

    def apply(self, event: Event) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...

    def publish(self) -> SessionView: ...

    def publish_if_due(self, now: float) -> bool: ...

    @property
    def published_view(self) -> SessionView | None: ...


StateFactory = Callable[[SessionInfo], State]

VIEW_PUBLISH_INTERVAL_S = 0.05
"""The hub thread republishes the state's view (when events changed it) at most at 20 Hz."""

FIRST_GPU_SAMPLE_TIMEOUT_S = 10.0
"""Bound on the first GPU sample at start (NVML init, or one dcgm-exporter fetch)."""

ADD_IDENTIFY_TIMEOUT_S = 3.0
"""Bound on each identifying request (/version, /v1/models) of a server added while the session
runs: a server that does not answer is still added, and shown down with that error."""

TARGET_CALL_TIMEOUT_S = 8.0
"""Bound on add_target / remove_target as seen by the caller."""


@dataclass(frozen=True, slots=True)
class Target:
    """One attached server: its base URL and where its /metrics page is."""

    url: str
    metrics_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    """A key typed for this server alone (the app's `a` dialog): sent to its origin only. The
    command line's key is the monitor's, scoped to the command line's servers."""

    @property
    def base(self) -> str:
        return server_base(self.url)

    @property
    def metrics(self) -> str:
        return self.metrics_url or metrics_url_for(self.base)


def pair_targets(urls: Sequence[str], metrics_urls: Sequence[str] = ()) -> list[Target]:
    """Targets from --attach URLs and --metrics-url URLs (paired in order).

    Raises ValueError with a clear message for bad URLs or more metrics URLs than servers.
    """
    if len(metrics_urls) > len(urls):
        raise ValueError(
            f"{len(metrics_urls)} --metrics-url given for {len(urls)} --attach server(s); "
            "give at most one per server, in the same order"
        )
    targets = []
    for i, url in enumerate(urls):
        metrics = metrics_urls[i] if i < len(metrics_urls) else None
        if metrics is not None:
            server_base(metrics)  # validates
            metrics = metrics.strip()
            if "://" not in metrics:  # host:port/path, as --attach accepts it
                metrics = "http://" + metrics
        target = Target(url, metrics)
        _ = target.base  # validates
        targets.append(target)
    return targets


def gpu_name(sample: GpuSampled | None) -> str | None:
    """The session's GPU in words, from one sample: "NVIDIA H200", "2 x NVIDIA H200", or the
    names in order when they differ ("NVIDIA H200, NVIDIA A100"); None when no GPU has a name."""
    if sample is None:
        return None
    counts = Counter(r.name for r in sample.gpus if r.name)
    if not counts:
        return None
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())


def session_info_from(identities: Sequence[ServerIdentity], gpu: str | None) -> SessionInfo:
    """One SessionInfo for the session: the first server's fields, every server in `extra`."""
    if not identities:
        return SessionInfo(gpu=gpu)
    first = identities[0].session_info()
    extra = dict(first.extra)
    if len(identities) > 1:
        extra["servers"] = [i.base_url for i in identities]
        extra[IDENTITIES_KEY] = identities_extra(
            (i.base_url, i.models[0] if i.models else None, i.vllm_version) for i in identities
        )
    return replace(
        first,
        simulated=any(i.simulated for i in identities),
        gpu=gpu,
        extra=extra,
    )


def _unanswered(identity: ServerIdentity, t: float) -> ServerStatusChanged | None:
    """A server that could not be identified at all (no model listed, and an error) is shown
    down with that error from the start, rather than absent until its scraper gives up on it
    (several timeouts later); its first good scrape makes it up."""
    if identity.models or not identity.error:
        return None
    return ServerStatusChanged(
        t=t, source=identity.base_url, status="down", detail=f"not identified: {identity.error}"
    )


def complete_info(identified: SessionInfo, known: SessionInfo | None) -> SessionInfo:
    """What the server says of itself (`identified`), completed by what the command knows of
    it (`known`: host mode's draft, method, K, command and preset); the command's draft, method
    and K win (a server does not announce them), the server's model, version and GPU win."""
    if known is None:
        return identified
    return replace(
        identified,
        model=identified.model or known.model,
        draft_model=known.draft_model,
        method=known.method,
        n_spec=known.n_spec,
        vllm_version=identified.vllm_version or known.vllm_version,
        gpu=identified.gpu or known.gpu,
        extra={**identified.extra, **known.extra},
    )


class Monitor:
    """Wires hub, state, recorder and sources for a set of attached servers."""

    def recorded_baseline(self) -> RecordedBaseline | None:
        """The vanilla baseline in effect (`--baseline`, else the stored one), for a
        recording's header; an unreadable store is reported by the state's factory."""
        if self.info is None:
            return None
        return recorded_baseline(self._baseline, self.info, warn=lambda _message: None)

    def __init__(
        self,
        targets: Sequence[Target],
        state_factory: StateFactory | None,
        *,
        api_key: str | None = None,
        gpu: GpuSampler | None = None,
        interval: float = 1.0,
        record: str | os.PathLike[str] | None = None,
        redact: Sequence[str] = (),
        hub: Hub | None = None,
        known: SessionInfo | None = None,
        stream_limits: StreamLimits = DEFAULT_LIMITS,
        secrets: Sequence[str] = (),
        baseline: float | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"--interval must be positive, got {interval}")
        self.targets = list(targets)
        self._state_factory = state_factory
        self._api_key = api_key or None
        """As the command line resolved it (core.credentials.resolve_api_key)."""
        self._keys = KeyScope.of(self._api_key, (t.url for t in self.targets))
        """The key goes to the origins of the servers given at construction (the command
        line's) only: not to a server added later, nor to another origin."""
        self._sampler = gpu
        self.interval = interval
        self._record = record
        self._baseline = baseline
        """`--baseline`: with the stored one, what a recording's header says was in effect."""
        self.stream_limits = stream_limits
        self.redact = tuple(redact)
        """`--redact` patterns for every recording of this session (checked here: a bad one
        raises RedactPatternError, a ValueError, before anything starts)."""
        compile_redactions(self.redact)
        self._known = known
        self._secrets = tuple(s for s in secrets if s)
        """Values the recording never holds beyond the API key (host mode: the server's)."""
        self.hub = hub or Hub()
        self.state: State | None = None
        self.recorder: Recorder | None = None
        self.info: SessionInfo | None = None
        self.identities: list[ServerIdentity] = []
        self.scrapers: list[MetricsScraper] = []
        self.clients: list[StreamClient] = []
        self._futures: list[concurrent.futures.Future[Any]] = []
        self._scraper_runs: dict[str, concurrent.futures.Future[Any]] = {}
        """The running scraper of each watched server, by base URL."""
        self._run_loops = True
        self._live: dict[str, object] = {}
        """The token of each watched server's current scraper: only its events pass (a removed
        server's late events, or those of a scraper replaced by a later add, are dropped)."""

    @property
    def urls(self) -> tuple[str, ...]:
        """Every server and /metrics URL given: their passwords never reach a recording."""
        return tuple(u for t in self.targets for u in (t.url, t.metrics_url) if u)

    # ------------------------------------------------------------ lifecycle

    def start(self, *, run_loops: bool = True) -> SessionInfo:
        """Start the hub, identify servers, subscribe state and recorder, start the sources.

        With `run_loops=False` nothing polls on its own (`watch --once` scrapes by hand).
        """
        hub = self.hub.start()
        for target in self.targets:
            client = StreamClient(
                target.base,
                api_key=self._keys.key_for(target.base),
                clock=hub.clock,
                limits=self.stream_limits,
            )
            self.clients.append(client)
            hub.add_closer(client.aclose)

        async def identify_all() -> list[ServerIdentity]:
            found = await asyncio.gather(
                *(identify(t.base, api_key=self._keys.key_for(t.base)) for t in self.targets)
            )
            for client, identity in zip(self.clients, found, strict=True):
                if identity.simulated:
                    client.simulated = True
            return list(found)

        self.identities = hub.submit(identify_all()).result(60)
        if self._sampler is not None:
            hub.add_closer(self._sampler.close)
        first_gpu = self._first_gpu_sample()
        self.info = complete_info(
            session_info_from(self.identities, gpu_name(first_gpu)), self._known
        )
        if self._state_factory is not None:  # None: a collector process, whose parent folds
            state = self.state = self._state_factory(self.info)
            hub.subscribe(state.apply)

            def publish_view() -> None:  # on the hub thread, under its lock
                state.publish_if_due(hub.clock())

            self._futures.append(hub.every(VIEW_PUBLISH_INTERVAL_S, publish_view))
        if self._record is not None:
            secrets = ((self._api_key,) if self._api_key else ()) + self._secrets
            self.recorder = Recorder(
                self._record,
                self.info,
                secrets=secrets,
                redact=self.redact,
                urls=self.urls,
                baseline=self.recorded_baseline(),
            )
            hub.subscribe(self.recorder)
            self._futures.append(hub.every(0.5, self.recorder.flush_if_due))
            hub.add_closer(self.recorder.close)
        if first_gpu is not None:
            hub.post(first_gpu)  # the reading that named the GPU is the session's first sample
        for identity in self.identities:
            unanswered = _unanswered(identity, hub.clock())
            if unanswered is not None:
                hub.post(unanswered)
        for target in self.targets:
            self.scrapers.append(self._new_scraper(target))
        self._run_loops = run_loops
        if run_loops:
            for target, scraper in zip(self.targets, self.scrapers, strict=True):
                self._start_scraper(target.base, scraper)
            gpu_run = self._gpu_source()
            if gpu_run is not None:
                self._futures.append(hub.run_source(gpu_run))
        return self.info

    def _new_scraper(self, target: Target) -> MetricsScraper:
        hub = self.hub
        scraper = MetricsScraper(
            target.metrics,
            source=target.base,
            clock=hub.clock,
            interval=self.interval,
            headers=self._metrics_headers(target),
        )
        hub.add_closer(scraper.aclose)
        return scraper

    def _start_scraper(self, base: str, scraper: MetricsScraper) -> None:
        hub = self.hub
        token = self._live[base] = object()

        def gated(event: Event) -> None:  # hub thread
            if self._live.get(base) is token:
                hub.emit(event)

        future = hub.submit(scraper.run(gated))
        self._scraper_runs[base] = future
        self._futures.append(future)

    # ------------------------------------------------------------ targets while running

    def add_target(self, target: Target) -> ServerIdentity:
        """Watch one more server while the session runs (blocking; call from any thread but
        the hub's). Identified with a short bound; a server that does not answer is added all
        the same and shown down with that error. Raises ValueError for a bad URL or a server
        already watched (raised here, not on the hub, whose task errors are the session's)."""
        base = target.base  # validates
        if self.info is None:
            raise RuntimeError("the monitor is not started")
        already = f"already watching {base}"

        async def add() -> ServerIdentity | str:
            if any(t.base == base for t in self.targets):
                return already
            key = self._key_of(target)  # None unless typed for it or on a command-line origin
            if self.recorder is not None:
                for secret in (target.api_key, *url_secrets((target.url, target.metrics_url))):
                    if secret:
                        self.recorder.add_secret(secret)
            identity = await identify(base, api_key=key, timeout=ADD_IDENTIFY_TIMEOUT_S)
            if any(t.base == base for t in self.targets):  # added meanwhile
                return already
            client = StreamClient(
                base, api_key=key, clock=self.hub.clock, limits=self.stream_limits
            )
            client.simulated = identity.simulated
            self.hub.add_closer(client.aclose)
            scraper = self._new_scraper(target)
            self.targets.append(target)
            self.clients.append(client)
            self.scrapers.append(scraper)
            self.identities.append(identity)
            unanswered = _unanswered(identity, self.hub.clock())
            if unanswered is not None:
                self.hub.emit(unanswered)
            if self._run_loops:
                self._start_scraper(base, scraper)
            return identity

        result = self.hub.submit(add()).result(TARGET_CALL_TIMEOUT_S)
        if isinstance(result, str):
            raise ValueError(result)
        return result

    def remove_target(self, url: str) -> str:
        """Stop watching a server (blocking; call from any thread but the hub's): its scraper
        stops, no later event of it passes, and a ServerStatusChanged "removed" is emitted (the
        state drops its row; a recording keeps the event). Returns its base URL; raises
        ValueError when it is not watched."""
        base = server_base(url)
        if self.info is None:
            raise RuntimeError("the monitor is not started")
        hub = self.hub

        async def remove() -> bool:
            found = [n for n, t in enumerate(self.targets) if t.base == base]
            if not found:
                return False
            i = found[0]
            self._live.pop(base, None)  # from now on its scraper's events are dropped
            run = self._scraper_runs.pop(base, None)
            if run is not None:
                run.cancel()
            del self.targets[i], self.scrapers[i], self.clients[i]
            if i < len(self.identities):
                del self.identities[i]
            hub.emit(ServerStatusChanged(t=hub.clock(), source=base, status="removed"))
            return True

        if not hub.submit(remove()).result(TARGET_CALL_TIMEOUT_S):
            raise ValueError(f"not watching {base}")
        return base

    def _metrics_headers(self, target: Target) -> dict[str, str]:
        # The key goes only to the origins it belongs to, not to a metrics address elsewhere.
        if target.api_key:
            return KeyScope.of(target.api_key, [target.url]).bearer_for(target.metrics)
        return self._keys.bearer_for(target.metrics)

    def _key_of(self, target: Target) -> str | None:
        """The key for `target`'s server: the one typed for it, else the command line's when
        the server is on one of the command line's origins, else none."""
        return target.api_key or self._keys.key_for(target.base)

    def _first_gpu_sample(self) -> GpuSampled | None:
        """One GPU sample taken before the SessionInfo is built (None without a GPU source, or
        when it does not answer in time: then the session's GPU stays unknown)."""
        sampler = self._sampler
        if sampler is None:
            return None
        hub = self.hub
        future = hub.submit(asyncio.to_thread(sampler.sample, hub.clock()))
        try:
            sample = future.result(FIRST_GPU_SAMPLE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return None
        return sample if isinstance(sample, GpuSampled) else None

    def _gpu_source(self) -> SourceRun | None:
        sampler = self._sampler
        if sampler is None:
            return None
        clock = self.hub.clock
        interval = self.interval

        def run(emit: Callable[[Event], None]) -> Any:
            return run_sampler(sampler, emit, clock, interval)

        return run

    def run_source(self, run: SourceRun) -> concurrent.futures.Future[Any]:
        """Run one more source on the hub (e.g. the demo's server log lines) until stop()."""
        future = self.hub.run_source(run)
        self._futures.append(future)
        return future

    def prompt_loop(
        self,
        requests: Sequence[ChatRequest],
        *,
        count: int | None = None,
        server: int = 0,
        name_requests: bool = False,
    ) -> concurrent.futures.Future[list[RequestEnded]]:
        """Send `requests` in turn to server number `server` (concurrency 1, end-of-request
        scrapes), `count` in all (None: until stop()); see runtime.prompt_loop."""
        if self.info is None:
            raise RuntimeError("the monitor is not started")
        future = self.hub.submit(
            prompt_loop(
                self.clients[server],
                requests,
                self.hub.emit,
                scraper=self.scrapers[server],
                count=count,
                name_requests=name_requests,
            )
        )
        self._futures.append(future)
        return future

    def scrape_all_once(self) -> None:
        """Scrape every server once and take one GPU sample (blocking; for `watch --once`)."""
        hub = self.hub

        async def once() -> None:
            await asyncio.gather(*(s.scrape_once(hub.emit) for s in self.scrapers))
            sampler = self._sampler  # closed by the hub at stop()
            if sampler is not None:
                hub.emit(await asyncio.to_thread(sampler.sample, hub.clock()))

        hub.submit(once()).result(120)

    def snapshot(self) -> dict[str, Any]:
        """The state's snapshot, read under the hub's lock (safe from any thread)."""
        if self.state is None:
            raise RuntimeError("the monitor is not started")
        return self.hub.read(self.state.snapshot)

    def view(self, *, fresh: bool = False) -> SessionView:
        """The state's latest published view, read WITHOUT the hub's lock (the hub thread
        republishes it when events changed the state, at most every VIEW_PUBLISH_INTERVAL_S).
        With `fresh` (e.g. `watch --once` after its scrapes), or before the first publish, the
        view is published now under the lock."""
        if self.state is None:
            raise RuntimeError("the monitor is not started")
        view = self.state.published_view
        if fresh or view is None:
            view = self.hub.read(self.state.publish)
        return view

    def stop(self) -> None:
        """Cancel sources, close clients and the recorder (fsync), stop the hub thread.

        Bounded by the hub's stop (`hub.STOP_TIMEOUT_S`). Should the hub give up before its
        closers ran, the recording is still closed here, so it ends whole."""
        self.hub.stop()
        recorder = self.recorder
        if recorder is not None and not recorder.closed:
            try:
                recorder.close()
            except OSError as exc:
                self.hub.errors.append(f"closing the recording: {exc}")

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
