"""One bench run against one server: prompts, warm-ups, the measured phase, /metrics and GPU.

The runner only gathers events (the stream client's, the /metrics scraper's, the GPU sampler's,
and its own phase markers) and writes them to the recording when asked; `analysis.analyze` turns
them into the result. The sequence:

1. identify the server (/version, /v1/models) and scrape /metrics once;
2. build the prompts (random ones sized with /tokenize, or the dataset file);
3. warm-ups (not measured), then a /metrics scrape and the `bench:start` marker;
4. the measured requests: at most `concurrency` in flight, sent at `request_rate` per second
   (Poisson arrivals, seeded; `inf` = as fast as the concurrency allows), for `num_prompts`
   requests or until `duration` has passed (a soak: errors are counted and the run goes on);
5. the `bench:end` marker, and a last /metrics scrape that waits until the server's generation
   counter has caught up with the tokens received.

During the measured phase /metrics is also scraped every `scrape_interval` seconds (default 5:
running-request counts for the batch-contention reason, restarts). Not every second: a server
renders the page on its own event loop (vLLM's API server and the simulator alike), so each scrape
delays its streams a little; `vllm bench serve` scrapes only before and after. The GPU is sampled
every `gpu_interval` seconds (default 1; it does not touch the server).

An engine that dies stops the run: `max_consecutive_errors` failures in a row, or an error that
names vLLM's EngineDeadError; the /health answer is added to the reason. Ctrl-C (task
cancellation) ends the measured phase, marks the run interrupted and keeps what was measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from specmon.bench.analysis import DEAD, END, INTERRUPTED, START
from specmon.bench.config import BenchConfig
from specmon.bench.prompts import (
    DatasetError,
    Prompt,
    Tokenizer,
    cycle_to,
    load_dataset,
    random_prompts,
    text_prompts,
)
from specmon.bench.result import ServerInfo
from specmon.bench.servers import Endpoint
from specmon.core.clock import Clock
from specmon.core.credentials import KeyScope
from specmon.core.events import (
    Event,
    GpuSampled,
    Marker,
    RequestEnded,
    RequestStarted,
    SessionInfo,
    StreamChunk,
)
from specmon.core.recording_format import RecordedBaseline
from specmon.core.specdecode import n_spec_of, spec_configured
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.runtime.hub import SessionClock
from specmon.runtime.recorder import Recorder
from specmon.sources.gpu.loop import GpuSampler
from specmon.sources.http_errors import describe_error
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens
from specmon.sources.server_identity import IDENTIFY_TIMEOUT_S, identify
from specmon.sources.stream_client import ChatRequest, ServerIdentity, StreamClient

ENGINE_DEAD_WORDS = ("EngineDeadError", "EngineCore encountered an issue", "engine is dead")
HEALTH_TIMEOUT_S = 5.0
INTERRUPTED_SCRAPE_S = 2.0
"""Bound on the last /metrics scrape after a stop signal (the process must write its results
within the bounded shutdown's grace, bench.interruptible.STOP_GRACE_S)."""
DEAD_SCRAPE_S = 5.0


class BenchError(RuntimeError):
    """The run cannot start (server unreachable, no model, bad dataset); str() says why."""


class Progress(Protocol):
    """What the runner tells the display (all calls on the runner's thread)."""

    def phase(self, name: str, total: int | None) -> None:
        """A phase begins: "prompts", "warmup", "measure" (total None: a timed soak)."""
        ...

    def request_done(self, ended: RequestEnded, tokens_per_s: float | None) -> None: ...

    def note(self, text: str) -> None:
        """A one-line remark (an engine found dead, a restart)."""
        ...


class NoProgress:
    def phase(self, name: str, total: int | None) -> None:
        return None

    def request_done(self, ended: RequestEnded, tokens_per_s: float | None) -> None:
        return None

    def note(self, text: str) -> None:
        return None


@dataclass(repr=False)
class RunOutput:
    """What a run gathered: events in arrival order and what the server said about itself."""

    events: list[Event]
    server: ServerInfo
    identity: ServerIdentity
    interrupted: bool = False
    session: SessionInfo | None = None
    prompts: list[Prompt] = field(default_factory=list)

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() formats the finished main task, result included, when
        # it restores the SIGINT handler (Python 3.11's signal module reprs the old handler in an
        # error message it then drops); a full repr of a run's events cost ~0.15 s of CPU.
        return (
            f"RunOutput({len(self.events)} events, {len(self.prompts)} prompts, "
            f"server={self.server.url!r}, interrupted={self.interrupted})"
        )


def server_info(identity: ServerIdentity, endpoint: Endpoint, model: str | None) -> ServerInfo:
    return ServerInfo(
        url=endpoint.base_url,
        model=model or (identity.models[0] if identity.models else None),
        vllm_version=identity.vllm_version,
        simulated=identity.simulated,
        profile=identity.profile,
        n_spec=identity.n_spec,
    )


class _Collector:
    """Every event goes to the list, the recorder and (request ends) the progress display."""

    def __init__(self, recorder: Recorder | None, progress: Progress) -> None:
        self.events: list[Event] = []
        self._recorder = recorder
        self._progress = progress
        self._sent: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self._recorder is not None:
            self._recorder.write(event)
        if type(event) is StreamChunk:  # nearly every event: nothing more to do
            return
        if isinstance(event, RequestStarted):
            self._sent[event.request_id] = event.t
        elif isinstance(event, RequestEnded):
            started = self._sent.pop(event.request_id, None)
            tok_s = None
            if started is not None and event.completion_tokens and event.t > started:
                tok_s = event.completion_tokens / (event.t - started)
            self._progress.request_done(event, tok_s)


def _plain_transport(url: str) -> httpx.AsyncHTTPTransport | None:
    """For an http:// server, a transport without a verified TLS context: loading the CA store
    costs about 0.05-0.1 s of CPU per client, for a context a plain-HTTP server never uses."""
    return None if url.startswith("https://") else httpx.AsyncHTTPTransport(verify=False)


async def _health(base_url: str, headers: dict[str, str]) -> str:
    try:
        async with httpx.AsyncClient(
            timeout=HEALTH_TIMEOUT_S, headers=headers, transport=_plain_transport(base_url)
        ) as http:
            resp = await http.get(base_url + "/health")
        return "/health 200" if resp.status_code == 200 else f"/health answered {resp.status_code}"
    except httpx.HTTPError as exc:
        return f"/health unreachable ({type(exc).__name__})"


def _gpu_sampler(gpu: str | GpuSampler) -> Any:
    if not isinstance(gpu, str):
        return gpu  # a sampler object (tests: NvmlSampler over FakeNvml)
    if gpu == "none":
        return None
    if gpu == "local":
        from specmon.sources.gpu import NvmlSampler

        return NvmlSampler()
    from specmon.sources.gpu import DcgmSampler

    return DcgmSampler(gpu)


async def _dataset_context_prompts(
    endpoint: Endpoint, model: str, key: str | None, config: BenchConfig, need: int
) -> list[Prompt]:
    """`need` prompts of the dataset's text, each cut to `input_len` tokens by /tokenize."""
    try:
        texts = [p.text for p in load_dataset(config.dataset, config.output_len)]
    except DatasetError as exc:
        raise BenchError(str(exc)) from None
    tokenizer = Tokenizer(
        endpoint.base_url,
        model,
        api_key=key,
        sizes="--context-sweep cuts the dataset's text with it",
    )
    try:
        return await text_prompts(
            texts, need, config.input_len, config.output_len, config.seed, tokenizer.count
        )
    except DatasetError as exc:
        raise BenchError(
            f"the dataset {config.dataset} is too short for {config.input_len:,} prompt tokens: "
            f"{exc}"
        ) from None
    except (httpx.HTTPError, RuntimeError) as exc:
        why = describe_error(exc, source=endpoint.base_url)
        raise BenchError(f"cannot cut the dataset's text to size: {why}") from None
    finally:
        await tokenizer.aclose()


async def run_bench(
    endpoint: Endpoint,
    config: BenchConfig,
    *,
    api_key: str | None = None,
    gpu: str | GpuSampler = "none",
    record: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
    scrape_interval: float = 5.0,
    gpu_interval: float = 1.0,
    prompts: Sequence[Prompt] | None = None,
    session_extra: dict[str, Any] | None = None,
    stream_limits: StreamLimits = DEFAULT_LIMITS,
    dataset_context: bool = False,
    baseline_tok_s: float | None = None,
) -> RunOutput:
    """Run one bench (see the module docstring); raises BenchError when it cannot start.
    `dataset_context` (bench --context-sweep with a dataset): the dataset's text is cut to
    `input_len` tokens (prompts.text_prompts) instead of its prompts being sent whole.
    `baseline_tok_s` (`--baseline`): written to the recording's header, so a replay judges the
    answers against the same vanilla baseline (docs/recording-format.md)."""
    progress = progress or NoProgress()
    clock = clock or SessionClock()
    keys = KeyScope.of(api_key, [endpoint.base_url])
    streamer = StreamClient(
        endpoint.base_url,
        api_key=api_key,
        clock=clock,
        max_connections=config.concurrency + 4,
        limits=stream_limits,
    )
    scraper = MetricsScraper(
        endpoint.metrics_url,
        source=endpoint.base_url,
        clock=clock,
        interval=scrape_interval,
        headers={} if endpoint.metrics_url_given else keys.bearer_for(endpoint.metrics_url),
        transport=_plain_transport(endpoint.metrics_url),
    )
    sampler = _gpu_sampler(gpu)
    recorder: Recorder | None = None
    tasks: list[asyncio.Task[Any]] = []
    try:
        identity = await identify(
            endpoint.base_url,
            api_key=api_key,
            timeout=IDENTIFY_TIMEOUT_S,
            transport=_plain_transport(endpoint.base_url),
        )
        if not identity.models:
            raise BenchError(
                f"cannot use {endpoint.base_url}: {identity.error or 'it lists no models'}"
            )
        model = config.model or identity.models[0]
        if config.model and config.model not in identity.models:
            raise BenchError(
                f"{endpoint.base_url} does not serve {config.model!r} (it lists "
                f"{', '.join(identity.models)})"
            )
        sink: list[Event] = []
        first = await scraper.scrape_once(sink.append)
        info = server_info(identity, endpoint, model)
        if first is not None:
            info = ServerInfo(
                **{
                    **{f: getattr(info, f) for f in ServerInfo.__dataclass_fields__},
                    "spec_configured": spec_configured(first.samples),
                    "n_spec": (
                        info.n_spec
                        if info.n_spec is not None
                        else (
                            n_spec_of(first.samples)
                            or (0 if not spec_configured(first.samples) else None)
                        )
                    ),
                }
            )
        first_gpu: GpuSampled | None = None
        if sampler is not None:
            first_gpu = await asyncio.to_thread(sampler.sample, clock())
            names = [r.name for r in first_gpu.gpus if r.name] if first_gpu else []
            if names:
                info = ServerInfo(
                    **{
                        **{f: getattr(info, f) for f in ServerInfo.__dataclass_fields__},
                        "gpu": names[0]
                        if len(set(names)) == 1 and len(names) == 1
                        else f"{len(names)} x {names[0]}",
                    }
                )
        session = SessionInfo(
            server=endpoint.base_url,
            model=model,
            n_spec=info.n_spec,
            vllm_version=info.vllm_version,
            gpu=info.gpu,
            simulated=info.simulated,
            extra={"bench": config.as_dict(), **(session_extra or {})},
        )
        if record is not None:
            recorder = Recorder(
                record,
                session,
                secrets=(api_key,) if api_key else (),
                clock=clock,
                baseline=None
                if baseline_tok_s is None
                else RecordedBaseline(baseline_tok_s, "given"),
            )
        collect = _Collector(recorder, progress)
        for e in sink:
            collect(e)
        if first_gpu is not None:
            collect(first_gpu)

        # ---- prompts
        need = config.num_prompts + config.warmups
        if prompts is None:
            progress.phase("prompts", need)
            if config.dataset == "random":
                tokenizer = Tokenizer(endpoint.base_url, model, api_key=api_key)
                try:
                    made = await random_prompts(
                        need, config.input_len, config.output_len, config.seed, tokenizer.count
                    )
                except (httpx.HTTPError, RuntimeError) as exc:
                    why = describe_error(exc, source=endpoint.base_url)
                    raise BenchError(f"cannot size random prompts: {why}") from None
                finally:
                    await tokenizer.aclose()
            elif dataset_context:
                made = await _dataset_context_prompts(endpoint, model, api_key, config, need)
            else:
                try:
                    made = cycle_to(load_dataset(config.dataset, config.output_len), need)
                except DatasetError as exc:
                    raise BenchError(str(exc)) from None
            prompts = made
        prompt_list = list(prompts)
        measured = prompt_list[: config.num_prompts]
        warm = prompt_list[config.num_prompts :] or measured[:1]

        if sampler is not None:
            from specmon.sources.gpu import run_sampler

            tasks.append(asyncio.create_task(run_sampler(sampler, collect, clock, gpu_interval)))
            sampler = None  # run_sampler closes it

        def request_of(p: Prompt) -> ChatRequest:
            extra = dict(config.extra_body)
            if config.ignore_eos:
                extra["ignore_eos"] = True
            return ChatRequest(
                prompt=p.text,
                model=model,
                max_tokens=p.output_len,
                temperature=config.temperature,
                extra_body=extra or None,
            )

        # ---- warm-ups
        if config.warmups > 0:
            progress.phase("warmup", config.warmups)
            await _dispatch(
                streamer,
                [request_of(warm[i % len(warm)]) for i in range(config.warmups)],
                collect,
                concurrency=config.concurrency,
                rate=math.inf,
                seed=config.seed,
                clock=clock,
            )

        # ---- measured phase
        # Objects made before the run (prompts, imports, a caller's heap) are frozen out of the
        # cyclic GC: a full collection over a large heap pauses the client for tens of ms and
        # would show as a slow request (seen at 20x simulator speed in a long test session).
        # Young generations only: a full collection costs ~0.1 s of CPU on a large heap, and
        # what it would free is only kept until gc.unfreeze() at the end of the run.
        gc.collect(1)
        gc.freeze()
        before = await scraper.scrape_once(collect)
        gen_before = generation_tokens(before.samples) if before is not None else None
        tasks.append(asyncio.create_task(scraper.run(collect)))
        progress.phase("measure", None if config.duration_s else config.num_prompts)
        collect(Marker(clock(), START))
        state = _DeadWatch(
            config.max_consecutive_errors,
            endpoint.base_url,
            keys.bearer_for(endpoint.base_url),
            progress,
        )
        interrupted = False
        try:
            await _dispatch(
                streamer,
                [request_of(p) for p in measured],
                collect,
                concurrency=config.concurrency,
                rate=config.request_rate,
                seed=config.seed,
                clock=clock,
                duration=config.duration_s,
                watch=state,
            )
        except asyncio.CancelledError:
            interrupted = True
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
        t_end = clock()
        if state.dead_reason is not None:
            collect(Marker(state.dead_t or t_end, f"{DEAD}: {state.dead_reason}"))
        if interrupted:
            collect(Marker(t_end, INTERRUPTED))
        collect(Marker(t_end, END))

        async def wind_down() -> None:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks.clear()
            if not interrupted and state.dead_reason is None:
                started_ids = _measured_ids(collect.events)
                received = sum(
                    e.completion_tokens or 0
                    for e in collect.events
                    if isinstance(e, RequestEnded) and e.request_id in started_ids
                )
                await scraper.scrape_until_generation(
                    collect, baseline=gen_before, expected_tokens=received, attempts=20, delay=0.1
                )
            else:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        scraper.scrape_once(collect),
                        INTERRUPTED_SCRAPE_S if interrupted else DEAD_SCRAPE_S,
                    )

        # A stop signal from here on comes after the last measured request: the run is whole.
        # The wind-down (the last /metrics scrape, bounded) is shielded from that cancellation,
        # which would otherwise drop the whole run.
        ending = asyncio.ensure_future(wind_down())
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            await ending
        return RunOutput(
            events=collect.events,
            server=info,
            identity=identity,
            interrupted=interrupted,
            session=session,
            prompts=prompt_list,
        )
    finally:
        gc.unfreeze()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if sampler is not None:
            sampler.close()
        await streamer.aclose()
        await scraper.aclose()
        if recorder is not None:
            recorder.close()


def _measured_ids(events: Sequence[Event]) -> set[str]:
    start = next((e.t for e in events if isinstance(e, Marker) and e.label == START), None)
    return {
        e.request_id
        for e in events
        if isinstance(e, RequestStarted) and start is not None and e.t >= start
    }


class _DeadWatch:
    """Counts failures in a row; decides when the engine is dead."""

    def __init__(
        self, limit: int, base_url: str, headers: dict[str, str], progress: Progress
    ) -> None:
        self.limit = limit
        self.base_url = base_url
        self.headers = headers
        self.progress = progress
        self.in_a_row = 0
        self.first_error: str | None = None
        self.dead_reason: str | None = None
        self.dead_t: float | None = None

    async def observe(self, ended: RequestEnded) -> bool:
        """Fold one finished request; True when the run must stop (engine dead)."""
        if ended.outcome == "ok":
            self.in_a_row = 0
            self.first_error = None
            return False
        if ended.outcome == "cancelled":
            return False
        self.in_a_row += 1
        error = ended.error or "failed"
        self.first_error = self.first_error or error
        named = any(w.lower() in error.lower() for w in ENGINE_DEAD_WORDS)
        if named or self.in_a_row >= self.limit:
            health = await _health(self.base_url, self.headers)
            why = (
                "the server reported its engine dead"
                if named
                else f"{self.in_a_row} requests failed in a row"
            )
            self.dead_reason = f"{why}; first error: {self.first_error}; {health}"
            self.dead_t = ended.t
            self.progress.note(f"engine dead: {self.dead_reason}")
            return True
        return False


async def _dispatch(
    client: StreamClient,
    requests: Sequence[ChatRequest],
    emit: Callable[[Event], None],
    *,
    concurrency: int,
    rate: float,
    seed: int,
    clock: Clock,
    duration: float | None = None,
    watch: _DeadWatch | None = None,
) -> None:
    """Send the requests (cycled while a duration runs) with the concurrency and rate limits."""
    if not requests:
        return
    rng = random.Random(seed + 17)
    slots = asyncio.Semaphore(concurrency)
    stop = asyncio.Event()
    running: set[asyncio.Task[None]] = set()
    t0 = clock()
    next_send = t0

    async def one(req: ChatRequest) -> None:
        try:
            ended = await client.chat(req, emit)
            if watch is not None and await watch.observe(ended):
                stop.set()
        finally:
            slots.release()

    i = 0
    try:
        while not stop.is_set():
            if duration is None and i >= len(requests):
                break
            if duration is not None and clock() - t0 >= duration:
                break
            if not math.isinf(rate):
                next_send += rng.expovariate(rate)
                wait = next_send - clock()
                if wait > 0:
                    await asyncio.sleep(wait)
            await slots.acquire()
            if stop.is_set() or (duration is not None and clock() - t0 >= duration):
                slots.release()
                break
            task = asyncio.create_task(one(requests[i % len(requests)]))
            running.add(task)
            task.add_done_callback(running.discard)
            i += 1
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    except asyncio.CancelledError:
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        raise
