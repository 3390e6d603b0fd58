"""The simulated vLLM server's HTTP surface: its routes, the simple endpoints, the /metrics page
and the periodic stats log lines. Generation requests are validated here (request_body) and run
by the engine (engine.py).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from datetime import datetime

from specmon.core.clock import Clock
from specmon.sim import logs, request_body, tokenizer
from specmon.sim.api_errors import ApiError
from specmon.sim.drift import Drift
from specmon.sim.engine import Engine, Sleeper
from specmon.sim.faults import FaultError, corrupt_metrics_page, parse_faults
from specmon.sim.gpu_page import SIM_GPU_PATH, gpu_page
from specmon.sim.http import HttpRequest, Responder
from specmon.sim.jsonwire import JsonObject, dumps
from specmon.sim.metrics import METRICS_CONTENT_TYPE
from specmon.sim.profiles import Profile
from specmon.sim.schedule import Schedule
from specmon.sim.spec_metrics import SpecMetricsLevel

__all__ = ["LogSink", "SimApp", "Sleeper", "stderr_sink"]

LogSink = Callable[[str], None]


def stderr_sink(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SimApp:
    """One simulated server: `handle` answers one HTTP request; `engine` holds the state."""

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
        spec_metrics: SpecMetricsLevel = "none",
        engines: int = 1,
        drift: Drift | None = None,
    ) -> None:
        self.profile = profile
        self.n_spec = n_spec
        self.seed = seed
        self.log_sink = log_sink
        self.engine = Engine(
            profile, n_spec, schedule, speed, seed, clock, sleep, spec_metrics, engines, drift
        )
        self.created = int(time.time())
        self.pid = os.getpid()
        self.refused = 0
        """Requests refused for their length (numbers their truth lines without an id)."""

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
        except ApiError as err:
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
        await out.send(200, dumps(body).encode())

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
        await out.send(200, dumps({"object": "list", "data": [card]}).encode())

    async def metrics_page(self, request: HttpRequest, out: Responder) -> None:
        engine = self.engine
        how = engine.metrics_fault_next
        engine.metrics_fault_next = None
        header = request.headers.get("x-specmon-fault")
        if header:
            try:
                how = parse_faults(header).metrics or how
            except FaultError as err:
                raise ApiError(400, str(err)) from None
        engine.update_gauges()
        page = engine.metrics.render()
        if how:
            page = corrupt_metrics_page(page, how)
        await out.send(200, page, content_type=METRICS_CONTENT_TYPE)

    async def gpu_metrics_page(self, request: HttpRequest, out: Responder) -> None:
        """The simulated GPU, as dcgm-exporter serves one (sim.gpu_page)."""
        engine = self.engine
        page = gpu_page(engine.gpu_state(), self.profile.gpu, running=engine.running)
        await out.send(200, page.encode(), content_type=METRICS_CONTENT_TYPE)

    async def tokenize(self, request: HttpRequest, out: Responder) -> None:
        body = request_body.parse_json_body(request.body)
        if "messages" in body:
            ids = request_body.prompt_ids_for_chat(body)
        elif isinstance(body.get("prompt"), str):
            ids = tokenizer.encode(
                body["prompt"],
                add_special_tokens=request_body.bool_field(body, "add_special_tokens", True),
            )
        else:
            raise ApiError(400, "tokenize needs `prompt` (a string) or `messages`")
        result = {
            "count": len(ids),
            "max_model_len": self.profile.max_model_len,
            "tokens": ids,
            "token_strs": None,
        }
        await out.send(200, dumps(result).encode())

    async def chat(self, request: HttpRequest, out: Responder) -> None:
        await self._generate(request, out, chat=True)

    async def completions(self, request: HttpRequest, out: Responder) -> None:
        await self._generate(request, out, chat=False)

    async def _generate(self, request: HttpRequest, out: Responder, chat: bool) -> None:
        body = request_body.parse_json_body(request.body)
        try:
            req = request_body.parse_generation(
                body,
                chat,
                self.profile.model,
                self.profile.max_model_len,
                request.headers.get("x-specmon-fault"),
            )
        except ApiError as err:
            self._refused_truth(body, err)
            raise
        await self.engine.generate(req, out)

    def _refused_truth(self, body: JsonObject, err: ApiError) -> None:
        """A request refused for its length goes into the truth file (sim.truth)."""
        truth = self.engine.truth
        if truth is None or "maximum context length" not in err.message:
            return
        rid = body.get("request_id")
        client_id = rid if isinstance(rid, str) else None
        self.refused += 1
        key = client_id if client_id is not None else f"refused-{self.refused}"
        truth.refused(key, client_id, err.message, self.engine.clock() - self.engine.started_at)

    # ------------------------------------------------------------------ logging

    def log_interval(self, elapsed_s: float, previous_busy: bool) -> bool:
        """Print the interval's lines if this or the previous interval was busy (vLLM logs idle
        intervals at DEBUG only); reset the sums. Returns whether this interval was busy."""
        stats = self.engine.take_interval()
        busy = stats.busy
        if busy or previous_busy:
            stamp = datetime.now().strftime("%m-%d %H:%M:%S")
            line = logs.engine_line(
                stats,
                elapsed_s,
                self.engine.running,
                0,
                self.engine.kv_usage(),
                self.engine.prefix_hit_rate(),
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
    SIM_GPU_PATH: ("GET", "gpu_metrics_page"),
    "/tokenize": ("POST", "tokenize"),
    "/v1/chat/completions": ("POST", "chat"),
    "/v1/completions": ("POST", "completions"),
}
