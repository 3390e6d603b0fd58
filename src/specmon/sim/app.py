"""The simulated vLLM server's routes and its engine: requests paced by the step model.

Each generation request runs as its own coroutine: prefill, then engine steps drawn from the step
model, each one sent as one SSE chunk carrying accepted+1 tokens, paced by an injectable clock and
sleeper (`--speed` divides every duration). Counters, gauges and histograms are updated per step
as vLLM updates them. Time observed by the histograms is the server's clock, so it agrees with
what a client measures at any speed.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime

from specmon.core.clock import Clock
from specmon.sim import logs, protocol, step_model, tokenizer
from specmon.sim.faults import FaultError, Faults, corrupt_metrics_page, parse_faults
from specmon.sim.http import HttpRequest, Responder
from specmon.sim.metrics import METRICS_CONTENT_TYPE, FinishedRequest, SimMetrics
from specmon.sim.profiles import Profile
from specmon.sim.schedule import Schedule

Sleeper = Callable[[float], Awaitable[None]]
LogSink = Callable[[str], None]

BLOCK_SIZE = 16
KV_BLOCKS = 4096
PREFIX_CACHE_BLOCKS = 65_536
YIELD_EVERY = 8
"""Steps between forced yields to the event loop when pacing has nothing to wait for."""


def stderr_sink(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SimApp:
    """All state of one simulated server; `handle` answers one HTTP request."""

    def __init__(
        self,
        profile: Profile,
        n_spec: int,
        schedule: Schedule | None,
        speed: float,
        seed: int,
        clock: Clock,
        sleep: Sleeper,
        log_sink: LogSink = stderr_sink,
    ) -> None:
        self.profile = profile
        self.n_spec = n_spec
        self.schedule = schedule
        self.speed = speed
        self.seed = seed
        self.clock = clock
        self.sleep = sleep
        self.log_sink = log_sink
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
        )
        self.requests_started = 0
        self.running = 0
        self.kv_tokens = 0
        self.metrics_fault_next: str | None = None
        self.interval = logs.IntervalStats(accepted_per_pos=[0] * n_spec)
        self.prefix_blocks: OrderedDict[int, None] = OrderedDict()
        self.prefix_recent: list[tuple[int, int]] = []
        self.scales = {
            phase: step_model.phase_acceptance_scale(profile, n_spec, phase)
            for phase in step_model.PHASES
        }
        self.created = int(time.time())
        self.pid = os.getpid()
        self.fingerprint = protocol.fingerprint(profile.vllm_version, seed)

    # ------------------------------------------------------------------ routing

    async def handle(self, request: HttpRequest, out: Responder) -> None:
        path = request.path.rstrip("/") or "/"
        route = _ROUTES.get(path)
        if route is None:
            await out.send(404, b'{"detail":"Not Found"}')
            return
        method, name = route
        if request.method != method and not (method == "GET" and request.method == "HEAD"):
            await out.send(405, b'{"detail":"Method Not Allowed"}', headers=[("allow", method)])
            return
        try:
            await getattr(self, name)(request, out)
        except protocol.ApiError as err:
            await out.send(err.status, err.body())

    async def health(self, request: HttpRequest, out: Responder) -> None:
        await out.send(200, b"", content_type=None)

    async def version(self, request: HttpRequest, out: Responder) -> None:
        body = {
            "version": self.profile.vllm_version,
            "simulated": True,
            "profile": self.profile.name,
            "n_spec": self.n_spec,
        }
        await out.send(200, protocol.dumps(body).encode())

    async def models(self, request: HttpRequest, out: Responder) -> None:
        card = {
            "id": self.profile.model,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": self.profile.model,
            "parent": None,
            "max_model_len": self.profile.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{random.Random(self.seed).getrandbits(128):032x}",
                    "object": "model_permission",
                    "created": self.created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        await out.send(200, protocol.dumps({"object": "list", "data": [card]}).encode())

    async def metrics_page(self, request: HttpRequest, out: Responder) -> None:
        how = self.metrics_fault_next
        self.metrics_fault_next = None
        header = request.headers.get("x-specmon-fault")
        if header:
            try:
                how = parse_faults(header).metrics or how
            except FaultError as err:
                raise protocol.ApiError(400, str(err)) from None
        self._update_gauges()
        page = self.metrics.render()
        if how:
            page = corrupt_metrics_page(page, how)
        await out.send(200, page, content_type=METRICS_CONTENT_TYPE)

    async def tokenize(self, request: HttpRequest, out: Responder) -> None:
        body = protocol.parse_json_body(request.body)
        if "messages" in body:
            ids = protocol.prompt_ids_for_chat(body)
        elif isinstance(body.get("prompt"), str):
            ids = tokenizer.encode(
                body["prompt"], add_special_tokens=protocol._bool(body, "add_special_tokens", True)
            )
        else:
            raise protocol.ApiError(400, "tokenize needs `prompt` (a string) or `messages`")
        result = {
            "count": len(ids),
            "max_model_len": self.profile.max_model_len,
            "tokens": ids,
            "token_strs": None,
        }
        await out.send(200, protocol.dumps(result).encode())

    async def chat(self, request: HttpRequest, out: Responder) -> None:
        await self._generate(request, out, chat=True)

    async def completions(self, request: HttpRequest, out: Responder) -> None:
        await self._generate(request, out, chat=False)

    # ------------------------------------------------------------------ engine

    def _update_gauges(self) -> None:
        self.metrics.running.set(self.running)
        self.metrics.waiting.set(0)
        self.metrics.kv_usage.set(min(1.0, self.kv_tokens / (KV_BLOCKS * BLOCK_SIZE)))

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

    async def _generate(self, request: HttpRequest, out: Responder, chat: bool) -> None:
        body = protocol.parse_json_body(request.body)
        req = protocol.parse_generation(
            body,
            chat,
            self.profile.model,
            self.profile.max_model_len,
            request.headers.get("x-specmon-fault"),
        )
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
        if faults.metrics:
            self.metrics_fault_next = faults.metrics
        if faults.error_status is not None:
            raise protocol.ApiError(
                faults.error_status,
                f"Simulated fault: HTTP {faults.error_status} (X-Specmon-Fault error=...)",
            )
        rng = random.Random(f"{self.seed}:{number}")
        tokens, stopped = tokenizer.answer_tokens(
            rng.randrange(1 << 30), req.max_tokens, req.ignore_eos
        )
        finish = "stop" if stopped else "length"
        prefix = "chatcmpl-" if chat else "cmpl-"
        request_id = f"{prefix}{rng.getrandbits(128):032x}"
        created = int(time.time())
        await self._run(req, out, number, phase, faults, rng, tokens, finish, request_id, created)

    async def _run(
        self,
        req: protocol.GenerationRequest,
        out: Responder,
        number: int,
        phase: str,
        faults: Faults,
        rng: random.Random,
        tokens: list[str],
        finish: str,
        request_id: str,
        created: int,
    ) -> None:
        metrics = self.metrics
        clock = self.clock
        speed = self.speed
        prompt_len = len(req.prompt_ids)
        arrival = clock()
        metrics.prompt_tokens.inc(prompt_len)
        metrics.prefix_queries.inc(prompt_len)
        hits = self._prefix_cache(req.prompt_ids)
        if hits:
            metrics.prefix_hits.inc(hits)
        self.interval.prompt_tokens += prompt_len
        self.running += 1
        self.kv_tokens += prompt_len
        kv_held = prompt_len
        writer = (
            protocol.ChunkWriter(req, request_id, created, self.fingerprint) if req.stream else None
        )
        sent = 0
        reason = "abort"
        first_token_t = last_token_t = arrival
        deadline = arrival
        steps_since_yield = 0
        stall_pending = faults.stall_s is not None
        drop_after = faults.drop_after
        try:
            if writer is not None:
                await out.start(200, "text/event-stream; charset=utf-8")
            if drop_after == 0:
                out.abort()
            scale = self.scales[phase]
            for step in step_model.request_steps(
                self.profile, self.n_spec, prompt_len, len(tokens), rng, scale
            ):
                duration = step.duration
                if not step.prefill:
                    duration *= step_model.contention_factor(self.profile, self.running)
                if stall_pending and sent >= faults.stall_after:
                    duration += faults.stall_s or 0.0
                    stall_pending = False
                deadline += duration / speed
                delay = deadline - clock()
                if delay > 0:
                    await self.sleep(delay)
                    steps_since_yield = 0
                else:
                    steps_since_yield += 1
                    if steps_since_yield >= YIELD_EVERY:
                        steps_since_yield = 0
                        await asyncio.sleep(0)
                if out.gone:
                    break
                now = clock()
                metrics.record_step(step.tokens, step.drafts, step.draft_tokens, step.accepted)
                self.interval.add_step(step.tokens, step.drafts, step.draft_tokens, step.accepted)
                self.kv_tokens += step.tokens
                kv_held += step.tokens
                if step.prefill:
                    first_token_t = now
                    metrics.h_ttft.observe(now - arrival)
                else:
                    metrics.h_itl.observe(now - last_token_t)
                last_token_t = now
                start = sent
                sent += step.tokens
                done = sent >= len(tokens)
                dropping = drop_after is not None and sent >= drop_after and not done
                if writer is not None:
                    if step.prefill:
                        role = writer.role()
                        if role is not None:
                            await out.write(role)
                    upto = min(sent, drop_after) if dropping and drop_after is not None else sent
                    if upto > start:
                        chunk = "".join(tokens[start:upto])
                        await out.write(writer.content(chunk, upto, finish if done else None))
                if dropping:
                    sent = min(sent, drop_after or 0)
                    out.abort()
                    break
                if out.gone:
                    break
                if done:
                    reason = finish
            if reason != "abort" and not out.gone:
                if writer is not None:
                    tail = writer.usage_chunk(sent) if req.include_usage else b""
                    await out.write(tail + writer.DONE)
                    await out.end()
                else:
                    text = "".join(tokens[:sent])
                    body = protocol.full_response(
                        req, request_id, created, text, sent, reason, self.fingerprint
                    )
                    await out.send(200, protocol.dumps(body).encode())
        finally:
            end = clock()
            self.running -= 1
            self.kv_tokens -= kv_held
            metrics.record_finished(
                FinishedRequest(
                    reason=reason,
                    prompt_tokens=prompt_len,
                    generation_tokens=sent,
                    max_tokens=req.max_tokens,
                    queue_s=0.0,
                    prefill_s=max(0.0, first_token_t - arrival),
                    decode_s=max(0.0, last_token_t - first_token_t),
                    e2e_s=max(0.0, end - arrival),
                )
            )

    # ------------------------------------------------------------------ logging

    def log_interval(self, elapsed_s: float, previous_busy: bool) -> bool:
        """Print the interval's lines if this or the previous interval was busy (vLLM logs idle
        intervals at DEBUG only); reset the sums. Returns whether this interval was busy."""
        stats = self.interval
        self.interval = logs.IntervalStats(accepted_per_pos=[0] * self.n_spec)
        busy = stats.busy
        if busy or previous_busy:
            stamp = datetime.now().strftime("%m-%d %H:%M:%S")
            hits = sum(h for h, _ in self.prefix_recent)
            queries = sum(q for _, q in self.prefix_recent)
            line = logs.engine_line(
                stats,
                elapsed_s,
                self.running,
                0,
                min(1.0, self.kv_tokens / (KV_BLOCKS * BLOCK_SIZE)),
                hits / queries if queries else 0.0,
            )
            self.log_sink(logs.prefixed(line, self.pid, stamp, "loggers.py:335"))
            if self.n_spec > 0:
                self.log_sink(
                    logs.prefixed(
                        logs.spec_line(stats, elapsed_s), self.pid, stamp, "metrics.py:120"
                    )
                )
        return busy


_ROUTES: dict[str, tuple[str, str]] = {
    "/health": ("GET", "health"),
    "/ping": ("GET", "health"),
    "/version": ("GET", "version"),
    "/v1/models": ("GET", "models"),
    "/metrics": ("GET", "metrics_page"),
    "/tokenize": ("POST", "tokenize"),
    "/v1/chat/completions": ("POST", "chat"),
    "/v1/completions": ("POST", "completions"),
}
