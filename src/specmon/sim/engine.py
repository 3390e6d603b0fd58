"""The simulated engine: runs each generation request through its steps, paced, and keeps the
server-side state vLLM would (counters, running requests, KV cache, prefix cache, log sums).

Each request runs as its own coroutine: prefill, then engine steps drawn from the step model, each
sent as one SSE chunk carrying accepted+1 tokens, paced by an injectable clock and sleeper
(`--speed` divides every duration). Counters, gauges and histograms are updated per step as vLLM
updates them, and so is the request's own `metrics.speculative_decoding` (from the same numbers,
so the two reconcile exactly). Time observed by the histograms is the server's clock, so it agrees
with what a client measures at any speed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specmon.core.clock import Clock
from specmon.sim import logs, request_body, responses, step_model, tokenizer
from specmon.sim.api_errors import ApiError
from specmon.sim.drift import (
    GARBLE_TOKENS,
    LOOP_PHRASE,
    LOOP_SCALE,
    Drift,
    GpuState,
    gpu_state,
    step_stretch,
)
from specmon.sim.faults import Faults
from specmon.sim.http import Responder
from specmon.sim.jsonwire import JsonObject, dumps
from specmon.sim.metrics import FinishedRequest, SimMetrics
from specmon.sim.profiles import Profile
from specmon.sim.schedule import Schedule
from specmon.sim.spec_metrics import RequestSpecMetrics, SpecMetricsLevel
from specmon.sim.truth import RequestTruth, TruthLog

Sleeper = Callable[[float], Awaitable[None]]

BLOCK_SIZE = 16
KV_BLOCKS = 4096
PREFIX_CACHE_BLOCKS = 65_536
YIELD_EVERY = 8
"""Steps between forced yields to the event loop when pacing has nothing to wait for."""


@dataclass(slots=True, kw_only=True)
class _Generation:
    """One generation request in the engine: what it asked for and how far it got."""

    req: request_body.GenerationRequest
    out: Responder
    phase: str
    """Its schedule phase: f(ast), t(ransition), d(egraded), r(ecovery)."""
    faults: Faults
    rng: random.Random
    tokens: list[str]
    """The whole answer it may get (EOS or max_tokens ends it)."""
    finish: str
    """The finish reason if it runs to the end: "stop" or "length"."""
    request_id: str
    created: int
    writer: responses.ChunkWriter | None
    """The SSE writer of a streamed request; None for a whole response."""
    spec: RequestSpecMetrics | None
    """Its `metrics.speculative_decoding` so far (None at the level "none")."""
    arrival: float
    first_token_t: float
    last_token_t: float
    deadline: float
    """When the next step is due (server clock)."""
    stall_pending: bool
    steps_since_yield: int = 0
    sent: int = 0
    """Tokens sent (or, for a whole response, generated) so far."""
    reason: str = "abort"
    """The finish reason recorded when it leaves: stays "abort" unless it ran to the end."""
    kv_held: int = 0
    engine: int = 0
    """The engine (data-parallel rank) serving it: requests go round-robin over the engines."""
    loops: bool = False
    garbled: bool = False
    """A `loop` drift made this answer repeat itself (sim.drift)."""
    truth: RequestTruth | None = None
    """Its ground truth so far, when the server writes a truth file (sim.truth)."""


class Engine:
    """The server-side state of one simulated server and the run of each request."""

    def __init__(
        self,
        profile: Profile,
        n_spec: int,
        schedule: Schedule | None,
        speed: float,
        seed: int,
        clock: Clock,
        sleep: Sleeper,
        spec_metrics: SpecMetricsLevel = "none",
        engines: int = 1,
        drift: Drift | None = None,
    ) -> None:
        self.profile = profile
        self.drift = drift if drift is not None else Drift()
        """Drifts with context, uptime and heat (`--drift`, sim.drift)."""
        self.started_at = clock()
        self.busy_s = 0.0
        """Model seconds of decode steps so far (what heats the simulated GPU)."""
        self.n_spec = n_spec
        self.schedule = schedule
        self.speed = speed
        self.seed = seed
        self.clock = clock
        self.sleep = sleep
        self.spec_metrics: SpecMetricsLevel = spec_metrics
        """`--per-request-spec-decode-metrics`: none, summary or detailed."""
        self.timing_metrics = False
        """`--enable-per-request-metrics`: the timing fields in each response's `metrics`."""
        self.metrics = SimMetrics(
            profile.model,
            n_spec,
            profile.max_model_len,
            {
                "block_size": BLOCK_SIZE,
                "cache_dtype": "fp8",
                "enable_prefix_caching": True,
                "gpu_memory_utilization": 0.92,
                "num_gpu_blocks": KV_BLOCKS,
                "num_cpu_blocks": None,
                "sliding_window": None,
            },
            engines=engines,
        )
        self.requests_started = 0
        self.running = 0
        self.running_by_engine = [0] * engines
        self.kv_tokens = 0
        self.metrics_fault_next: str | None = None
        self.interval = logs.IntervalStats(accepted_per_pos=[0] * n_spec)
        self.prefix_blocks: OrderedDict[int, None] = OrderedDict()
        self.prefix_recent: list[tuple[int, int]] = []
        self.scales = {
            phase: step_model.phase_acceptance_scale(profile, n_spec, phase)
            for phase in step_model.PHASES
        }
        self.fingerprint = responses.fingerprint(profile.vllm_version, seed)
        self.truth: TruthLog | None = None
        """Where the ground truth goes (`--truth FILE`, sim.truth); never read by a monitor."""

    def update_gauges(self) -> None:
        for engine, running in zip(self.metrics.engines, self.running_by_engine, strict=True):
            engine.running.set(running)
            engine.waiting.set(0)
            engine.kv_usage.set(self.kv_usage())

    def kv_usage(self) -> float:
        """Share of the KV cache the running requests hold (0..1)."""
        return min(1.0, self.kv_tokens / (KV_BLOCKS * BLOCK_SIZE))

    def prefix_hit_rate(self) -> float:
        """Prefix-cache hits over queries of the recent requests (0 with none)."""
        hits = sum(h for h, _ in self.prefix_recent)
        queries = sum(q for _, q in self.prefix_recent)
        return hits / queries if queries else 0.0

    def take_interval(self) -> logs.IntervalStats:
        """The sums since the last call (for the periodic log lines), reset to zero."""
        stats = self.interval
        self.interval = logs.IntervalStats(accepted_per_pos=[0] * self.n_spec)
        return stats

    def _prefix_cache(self, ids: list[int]) -> int:
        """Tokens of `ids` found in the prefix cache (whole blocks), then cache them."""
        hits = 0
        h = 0
        missed = False
        for start in range(0, len(ids) - BLOCK_SIZE + 1, BLOCK_SIZE):
            h = hash((h, *ids[start : start + BLOCK_SIZE]))
            if not missed and h in self.prefix_blocks:
                hits += BLOCK_SIZE
                self.prefix_blocks.move_to_end(h)
            else:
                missed = True
                self.prefix_blocks[h] = None
                if len(self.prefix_blocks) > PREFIX_CACHE_BLOCKS:
                    self.prefix_blocks.popitem(last=False)
        self.prefix_recent.append((hits, len(ids)))
        del self.prefix_recent[:-1000]
        return hits

    def restart(self) -> None:
        """Counters back to 0 and a cold prefix cache, as after a server restart."""
        self.metrics.reset()
        self.prefix_blocks.clear()
        self.prefix_recent.clear()

    async def generate(self, req: request_body.GenerationRequest, out: Responder) -> None:
        """Run one validated generation request to its end (or the client's)."""
        await self._run(self._admit(req, out))

    def _admit(self, req: request_body.GenerationRequest, out: Responder) -> _Generation:
        """Number the request, apply its schedule entry and faults, draw its answer."""
        self.requests_started += 1
        number = self.requests_started
        phase = "f"
        faults = req.faults
        if self.schedule is not None:
            entry = self.schedule.entry_for(number)
            phase = entry.phase
            faults = entry.faults.merged(req.faults)
        if faults.restart:
            self.restart()
            if self.truth is not None:
                self.truth.restart(number, self.clock() - self.started_at)
        if faults.metrics:
            self.metrics_fault_next = faults.metrics
        if faults.error_status is not None:
            raise ApiError(
                faults.error_status,
                f"Simulated fault: HTTP {faults.error_status} (X-Specmon-Fault error=...)",
            )
        rng = random.Random(f"{self.seed}:{number}")
        tokens, stopped = tokenizer.answer_tokens(
            rng.randrange(1 << 30), req.max_tokens, req.ignore_eos
        )
        loops = self.drift.loops(number)
        if loops:
            tokens = [LOOP_PHRASE[i % len(LOOP_PHRASE)] for i in range(len(tokens))]
        garbled = not loops and self.drift.garbles(number)
        if garbled:
            tokens = [rng.choice(GARBLE_TOKENS) for _ in tokens]
        request_id = f"{'chatcmpl-' if req.chat else 'cmpl-'}{rng.getrandbits(128):032x}"
        if req.request_id is not None:  # vLLM's body field names the request
            request_id = f"{'chatcmpl-' if req.chat else 'cmpl-'}{req.request_id}"
        created = int(time.time())
        writer = (
            responses.ChunkWriter(req, request_id, created, self.fingerprint)
            if req.stream
            else None
        )
        arrival = self.clock()
        return _Generation(
            engine=(number - 1) % len(self.running_by_engine),
            req=req,
            out=out,
            phase=phase,
            faults=faults,
            rng=rng,
            tokens=tokens,
            finish="stop" if stopped else "length",
            request_id=request_id,
            created=created,
            writer=writer,
            spec=RequestSpecMetrics.new(self.n_spec, self.spec_metrics),
            arrival=arrival,
            first_token_t=arrival,
            last_token_t=arrival,
            deadline=arrival,
            stall_pending=faults.stall_s is not None,
            loops=loops,
            garbled=garbled,
            truth=None
            if self.truth is None
            else RequestTruth(
                number=number,
                key=req.request_id if req.request_id is not None else request_id,
                server_id=request_id,
                client_request_id=req.request_id,
                phase=phase,
                loops=loops,
                garbled=garbled,
                prompt_tokens=len(req.prompt_ids),
                arrival_s=arrival - self.started_at,
            ),
        )

    async def _run(self, gen: _Generation) -> None:
        """Prefill and decode steps, each sent as it completes; then the end of the answer."""
        self._open(gen)
        try:
            await self._steps(gen)
            if gen.reason != "abort" and not gen.out.gone:
                await self._respond(gen)
        finally:
            self._close(gen)

    def _open(self, gen: _Generation) -> None:
        """The prompt enters the engine: prompt counters, prefix cache, running, KV cache."""
        prompt_len = len(gen.req.prompt_ids)
        metrics = self.metrics.engines[gen.engine]
        metrics.prompt_tokens.inc(prompt_len)
        metrics.prefix_queries.inc(prompt_len)
        hits = self._prefix_cache(gen.req.prompt_ids)
        if hits:
            metrics.prefix_hits.inc(hits)
        self.interval.prompt_tokens += prompt_len
        self.running += 1
        self.running_by_engine[gen.engine] += 1
        self.kv_tokens += prompt_len
        gen.kv_held = prompt_len

    async def _steps(self, gen: _Generation) -> None:
        """Run the request's engine steps, paced, until its last token, a drop or a hang-up."""
        out = gen.out
        if gen.writer is not None:
            await out.start(200, "text/event-stream; charset=utf-8")
        if gen.faults.drop_after == 0:
            out.abort()
        steps = step_model.request_steps(
            self.profile,
            self.n_spec,
            len(gen.req.prompt_ids),
            len(gen.tokens),
            gen.rng,
            self.scales[gen.phase],
            self._scale_at(gen),
        )
        scale_at = self._scale_at(gen) if gen.truth is not None else None
        for step in steps:
            if gen.truth is not None and self.truth is not None and not step.prefill:
                scale = self.scales[gen.phase] * (scale_at(gen.sent) if scale_at else 1.0)
                self.truth.step(gen.truth, scale, self.gpu_state().sm_clock_mhz)
            await self._pace(gen, step)
            if out.gone:
                return
            self._record(gen, step)
            if not await self._send(gen, step):
                return

    def _scale_at(self, gen: _Generation) -> Callable[[int], float] | None:
        """The drift's acceptance factor after `emitted` tokens of this answer (None: none)."""
        drift = self.drift
        if not drift.active:
            return None
        prompt = len(gen.req.prompt_ids)
        loop = LOOP_SCALE if gen.loops else 0.0 if gen.garbled else 1.0

        def scale_at(emitted: int) -> float:
            uptime = (self.clock() - self.started_at) * self.speed
            return loop * drift.acceptance_scale(prompt + emitted, uptime)

        return scale_at

    def gpu_state(self) -> GpuState:
        """The simulated GPU now (temperature, SM clock, power) under the thermal drift."""
        return gpu_state(self.drift.heat_s, self.busy_s, self.running)

    async def _pace(self, gen: _Generation, step: step_model.Step) -> None:
        """Wait until the step is due: its duration (stretched by the batch and by a stall
        fault) after the previous one, divided by --speed; yield now and then when late."""
        duration = step.duration
        if not step.prefill:
            duration *= step_model.contention_factor(self.profile, self.running)
            if self.drift.heat_s is not None:
                duration *= step_stretch(self.gpu_state())
            self.busy_s += duration
        if gen.stall_pending and gen.sent >= gen.faults.stall_after:
            duration += gen.faults.stall_s or 0.0
            gen.stall_pending = False
        gen.deadline += duration / self.speed
        delay = gen.deadline - self.clock()
        if delay > 0:
            await self.sleep(delay)
            gen.steps_since_yield = 0
            return
        gen.steps_since_yield += 1
        if gen.steps_since_yield >= YIELD_EVERY:
            gen.steps_since_yield = 0
            await asyncio.sleep(0)

    def _record(self, gen: _Generation, step: step_model.Step) -> None:
        """Count a finished step as vLLM does: server counters, the log interval, the KV cache,
        TTFT/ITL, and the request's own speculative-decoding object (from the same numbers, so
        the two reconcile exactly)."""
        now = self.clock()
        metrics = self.metrics.engines[gen.engine]
        metrics.record_step(step.tokens, step.drafts, step.draft_tokens, step.accepted)
        self.interval.add_step(step.tokens, step.drafts, step.draft_tokens, step.accepted)
        if step.drafts and gen.spec is not None:
            gen.spec.observe(step.draft_tokens, step.accepted)
        self.kv_tokens += step.tokens
        gen.kv_held += step.tokens
        if step.prefill:
            gen.first_token_t = now
            metrics.h_ttft.observe(now - gen.arrival)
        else:
            metrics.h_itl.observe(now - gen.last_token_t)
        gen.last_token_t = now

    async def _send(self, gen: _Generation, step: step_model.Step) -> bool:
        """Stream the step's tokens as one chunk (the role chunk first, after the prefill).
        False when the answer stops here: a drop fault or the client gone."""
        out = gen.out
        start = gen.sent
        gen.sent += step.tokens
        done = gen.sent >= len(gen.tokens)
        drop_after = gen.faults.drop_after
        dropping = drop_after is not None and gen.sent >= drop_after and not done
        upto = min(gen.sent, drop_after) if dropping and drop_after is not None else gen.sent
        if gen.writer is not None:
            if step.prefill:
                role = gen.writer.role()
                if role is not None:
                    await out.write(role)
            if upto > start:
                chunk = "".join(gen.tokens[start:upto])
                await out.write(gen.writer.content(chunk, upto, gen.finish if done else None))
        if dropping:
            gen.sent = upto
            out.abort()
            return False
        if out.gone:
            return False
        if done:
            gen.reason = gen.finish
        return True

    async def _respond(self, gen: _Generation) -> None:
        """The end of a complete answer: the usage chunk (with the per-request object) and
        [DONE] when streamed, else the whole response."""
        spec = gen.spec.to_dict() if gen.spec is not None else None
        timing = self._timing(gen) if self.timing_metrics else None
        if gen.writer is not None:
            tail = gen.writer.usage_chunk(gen.sent, spec, timing) if gen.req.include_usage else b""
            await gen.out.write(tail + gen.writer.DONE)
            await gen.out.end()
            return
        body = responses.full_response(
            gen.req,
            gen.request_id,
            gen.created,
            "".join(gen.tokens[: gen.sent]),
            gen.sent,
            gen.reason,
            self.fingerprint,
            spec,
            timing,
        )
        await gen.out.send(200, dumps(body).encode())

    def _timing(self, gen: _Generation) -> JsonObject:
        """The request's timing fields as vLLM computes them (the simulator has no queue: a
        request is scheduled on arrival, so queue time is 0 and TTFT runs from arrival)."""
        return responses.timing_metrics(
            queue_s=0.0,
            ttft_s=max(0.0, gen.first_token_t - gen.arrival),
            generation_s=max(0.0, gen.last_token_t - gen.first_token_t),
            tokens=gen.sent,
            since_scheduled_s=max(0.0, gen.last_token_t - gen.arrival),
        )

    def _close(self, gen: _Generation) -> None:
        """The request leaves the engine, whatever ended it: running, KV cache, and the
        per-request histograms with its finish reason."""
        end = self.clock()
        if gen.truth is not None and self.truth is not None:
            self.truth.request(
                gen.truth, tokens=gen.sent, finish=gen.reason, end_s=end - self.started_at
            )
        self.running -= 1
        self.running_by_engine[gen.engine] -= 1
        self.kv_tokens -= gen.kv_held
        self.metrics.engines[gen.engine].record_finished(
            FinishedRequest(
                reason=gen.reason,
                prompt_tokens=len(gen.req.prompt_ids),
                generation_tokens=gen.sent,
                max_tokens=gen.req.max_tokens,
                queue_s=0.0,
                prefill_s=max(0.0, gen.first_token_t - gen.arrival),
                decode_s=max(0.0, gen.last_token_t - gen.first_token_t),
                e2e_s=max(0.0, end - gen.arrival),
            )
        )
