"""Starting and stopping the simulated server: in the foreground (`specmon sim`) or in a thread.

`start_in_thread(SimConfig(...))` runs the server on its own asyncio loop in a daemon thread and
returns a `RunningSim` with `.url` and `.stop()` (also a context manager). The clock and sleeper
are injectable so tests pace it without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from specmon.core.clock import Clock, monotonic_clock
from specmon.sim.app import LogSink, SimApp, Sleeper, stderr_sink
from specmon.sim.drift import Drift, DriftError, parse_drift
from specmon.sim.http import HttpServer
from specmon.sim.profiles import DEFAULT_PROFILE, get_profile
from specmon.sim.schedule import Schedule, parse_schedule
from specmon.sim.spec_metrics import SpecMetricsLevel, check_level
from specmon.sim.truth import open_truth


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What a simulated server runs as. `n_spec=None` takes the profile's default."""

    profile: str = DEFAULT_PROFILE
    n_spec: int | None = None
    schedule: str | None = None
    speed: float = 1.0
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 0
    log_interval: float = 10.0
    """Seconds between vLLM-shaped stats lines on stderr while busy (<= 0: never)."""
    per_request_spec_decode_metrics: str = "none"
    """vLLM's `--per-request-spec-decode-metrics`: none (vLLM's default), summary or detailed
    (docs/simulator.md); anything but none needs speculation (n_spec > 0), as in vLLM."""
    enable_per_request_metrics: bool = False
    """vLLM's `--enable-per-request-metrics`: the per-request timing fields (queue, TTFT,
    generation time, mean ITL, tok/s) in each response's `metrics`."""
    engines: int = 1
    """Engines (data-parallel ranks): one `engine` label per rank on /metrics, requests served
    round-robin (1..16)."""
    drift: str | None = None
    """Drifts with context length, uptime, heat, or looping answers (sim.drift; default none)."""
    truth: str | None = None
    """A file for the ground truth of every request (sim.truth; default none). A monitor never
    reads it: it is for scoring verdicts (benchmarks/verdicts.py)."""


class SimConfigError(ValueError):
    """A configuration that cannot run; the message is one line naming the valid choices."""


@dataclass(frozen=True, slots=True)
class Resolved:
    profile_name: str
    n_spec: int
    schedule: Schedule | None
    spec_metrics: SpecMetricsLevel = "none"
    drift: Drift | None = None


def resolve(config: SimConfig) -> Resolved:
    """Check a config: profile, n_spec, speed, port and schedule; SimConfigError if any is bad."""
    try:
        profile = get_profile(config.profile)
    except ValueError as err:
        raise SimConfigError(str(err)) from None
    n_spec = profile.default_n_spec if config.n_spec is None else config.n_spec
    if n_spec < 0 or n_spec > 64:
        raise SimConfigError(f"n_spec must be 0..64, got {n_spec}")
    if not config.speed > 0 or math.isnan(config.speed):
        raise SimConfigError(f"speed must be > 0 (inf for no pacing), got {config.speed}")
    if not 0 <= config.port <= 65535:
        raise SimConfigError(f"port must be 0..65535 (0 = any free port), got {config.port}")
    schedule = None
    if config.schedule:
        try:
            schedule = parse_schedule(config.schedule)
        except ValueError as err:
            raise SimConfigError(str(err)) from None
    try:
        spec_metrics = check_level(config.per_request_spec_decode_metrics)
    except ValueError as err:
        raise SimConfigError(str(err)) from None
    if not 1 <= config.engines <= 16:
        raise SimConfigError(f"engines must be 1..16, got {config.engines}")
    if spec_metrics != "none" and n_spec == 0:
        raise SimConfigError(
            "--per-request-spec-decode-metrics requires speculative decoding (n_spec > 0), "
            "as in vLLM"
        )
    drift = None
    if config.drift:
        try:
            drift = parse_drift(config.drift)
        except DriftError as err:
            raise SimConfigError(str(err)) from None
    return Resolved(profile.name, n_spec, schedule, spec_metrics, drift)


class SimServer:
    """One simulated server on the running event loop: `await start()`, `await stop()`."""

    def __init__(
        self,
        config: SimConfig,
        clock: Clock = monotonic_clock,
        sleep: Sleeper = asyncio.sleep,
        log_sink: LogSink = stderr_sink,
    ) -> None:
        resolved = resolve(config)
        self.config = config
        self.app = SimApp(
            get_profile(resolved.profile_name),
            resolved.n_spec,
            resolved.schedule,
            config.speed,
            config.seed,
            clock,
            sleep,
            log_sink,
            resolved.spec_metrics,
            config.engines,
            resolved.drift,
        )
        self.app.engine.timing_metrics = config.enable_per_request_metrics
        if config.truth:
            try:
                truth = open_truth(config.truth, self.app.profile, resolved.n_spec)
            except OSError as err:
                raise SimConfigError(
                    f"cannot write the truth file {config.truth!r}: {err.strerror or err}"
                ) from None
            truth.session(resolved.schedule, self.app.engine.drift, config.seed)
            self.app.engine.truth = truth
        self.http = HttpServer(self.app.handle, config.host, config.port)
        self._log_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.http.port}"

    async def start(self) -> None:
        await self.http.start()
        if self.config.log_interval > 0:
            self._log_task = asyncio.create_task(self._log_loop(self.config.log_interval))

    async def stop(self) -> None:
        if self._log_task is not None:
            self._log_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._log_task
        await self.http.stop()
        truth = self.app.engine.truth
        if truth is not None:
            self.app.engine.truth = None
            truth.close()

    async def _log_loop(self, interval: float) -> None:
        last = time.monotonic()
        previous_busy = False
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            previous_busy = self.app.log_interval(now - last, previous_busy)
            last = now


class RunningSim:
    """A simulated server running in its own thread; stop() joins the thread and frees the port."""

    def __init__(
        self,
        config: SimConfig,
        clock: Clock = monotonic_clock,
        sleep: Sleeper | None = None,
        log_sink: LogSink = stderr_sink,
    ) -> None:
        resolve(config)  # fail here, in the caller's thread, on a bad config
        self.config = config
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self.server: SimServer | None = None
        self._factory: Callable[[], SimServer] = lambda: SimServer(
            config, clock, sleep or asyncio.sleep, log_sink
        )
        self._thread = threading.Thread(target=self._main, name="specmon-sim", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        try:
            self.server = self._factory()
            await self.server.start()
        except BaseException as err:
            self._error = err
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await self.server.stop()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def app(self) -> SimApp:
        """The running server (for tests: its log lines; `.engine` holds counters and requests)."""
        assert self.server is not None
        return self.server.app

    def call(self, fn: Callable[[], object]) -> None:
        """Run `fn` on the server's loop thread (e.g. to trigger a restart) and wait for it."""
        assert self._loop is not None
        done = threading.Event()

        def run() -> None:
            try:
                fn()
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait()

    def stop(self) -> None:
        """Stop serving, close every connection, join the thread. Safe to call twice."""
        if self._loop is not None and self._stop_event is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join()

    def __enter__(self) -> RunningSim:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_in_thread(
    config: SimConfig,
    *,
    clock: Clock = monotonic_clock,
    sleep: Sleeper | None = None,
    log_sink: LogSink = stderr_sink,
) -> RunningSim:
    """Start a simulated server in a background thread; returns once it accepts connections."""
    return RunningSim(config, clock=clock, sleep=sleep, log_sink=log_sink)
