"""`specmon demo`: the built-in simulated DFlash server, a prompt loop, and live numbers.

The simulator runs in its own thread on a free loopback port with the seeds' degradation cycle
(`cycle:5f,1t,3d,1r`). On a terminal this opens the chat app (the same as `specmon chat`) against
it: the demo's prompts are sent one after another, and you can type your own at any time (they
go next); ctrl+l shows the simulator's log; ctrl+q or Ctrl-C quits. Without a terminal, or with
--json, the hub runs the prompt loop and plain lines (or the final JSON) are printed. Everything
is labelled SIMULATED. Ctrl-C (or the end of `--requests`) stops the loop, the hub and the
simulator, leaving no thread or port behind.

Exit status: 0 after `--requests`, and when the app is quit (ctrl+q); 130 on Ctrl-C (SIGINT, or
the key in the app), 143 on SIGTERM and 129 on SIGHUP (the terminal closed); each after the
recording is closed (within 2 s; a second signal exits at once); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.cli.args import PlanError, add_command, fail, pace, positive_int
from specmon.cli.export_args import add_export_argument
from specmon.cli.session_setup import (
    add_baseline_argument,
    add_redact_argument,
    add_theme_argument,
)
from specmon.cli.stream_args import add_stream_args, stream_limits_from
from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.sim.drift import DRIFT_SYNTAX

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx/rich
    from specmon.core.events import SessionInfo
    from specmon.runtime.monitor import Monitor
    from specmon.sim.server import SimConfig
    from specmon.ui.host import LogSource

DEMO_SCHEDULE = "cycle:5f,1t,3d,1r"

DEMO_PROMPTS: tuple[str, ...] = (
    "Explain speculative decoding to a new colleague in three short paragraphs.",
    "Write a Python function that merges two sorted lists, with a docstring and a test.",
    "List five things that make a GPU throttle its clocks, one line each.",
    "Summarise what acceptance length means for a draft model, with a small example.",
    "Write a haiku about a server that answers faster than it thinks.",
    "Compare ngram drafting and a small draft model: when does each one win?",
    "Give a step-by-step plan to benchmark num_speculative_tokens on one GPU.",
    "Describe a Space Invaders game loop in pseudo-code.",
)


NAME = "demo"
SUMMARY = "run the built-in simulated server and watch it (no GPU needed; labelled SIMULATED)"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument("--profile", default=None, help="simulator profile (default: the sim's)")
    p.add_argument("--n-spec", type=int, default=None, help="num_speculative_tokens to simulate")
    p.add_argument("--speed", type=pace, default=1.0, help="pace multiplier (default 1.0)")
    p.add_argument("--requests", type=positive_int, default=None, help="stop after N requests")
    p.add_argument(
        "--max-tokens", type=positive_int, default=256, help="tokens per answer (default 256)"
    )
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    add_redact_argument(p)
    p.add_argument(
        "--json", action="store_true", help="print the final snapshot as JSON at the end"
    )
    p.add_argument(
        "--schedule", default=DEMO_SCHEDULE, help=f"sim schedule (default {DEMO_SCHEDULE})"
    )
    p.add_argument(
        "--drift",
        default=None,
        help=f"sim drifts: {DRIFT_SYNTAX}",
    )
    p.add_argument(
        "--truth",
        metavar="FILE",
        default=None,
        help="write the simulator's ground truth of every request to FILE (JSON lines keyed by "
        "the request ids of the recording; docs/diagnosis.md, 'Ground truth'); specmon never "
        "reads it. In the app (a terminal without --json) its keys are the server's ids",
    )
    add_baseline_argument(p)
    add_theme_argument(p)
    add_export_argument(p)
    add_stream_args(p)


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """What `specmon demo` does, read from its command line (`plan_from`)."""

    sim: SimConfig
    max_tokens: int = 256
    requests: int | None = None
    json: bool = False
    record: str | None = None
    redact: tuple[str, ...] = ()
    baseline: float | None = None
    theme: str | None = None
    export: tuple[str, int] | None = None
    limits: StreamLimits = DEFAULT_LIMITS


def plan_from(args: argparse.Namespace) -> DemoPlan:
    """The demo the arguments ask for; PlanError (one line, exit 2) for a simulator setting
    that cannot be used."""
    from specmon.sim.server import SimConfig, SimConfigError, resolve

    kwargs: dict[str, Any] = {"speed": args.speed, "schedule": args.schedule, "port": 0}
    if args.drift:
        kwargs["drift"] = args.drift
    if args.truth:
        kwargs["truth"] = args.truth
    if args.profile is not None:
        kwargs["profile"] = args.profile
    if args.n_spec is not None:
        kwargs["n_spec"] = args.n_spec
    if args.n_spec != 0:  # every answer carries the server's own acceptance, as vLLM's flag does
        kwargs["per_request_spec_decode_metrics"] = "detailed"
    try:
        sim = SimConfig(**kwargs)
        resolve(sim)
    except (SimConfigError, ValueError) as exc:
        raise PlanError(str(exc)) from None
    return DemoPlan(
        sim,
        max_tokens=args.max_tokens,
        requests=args.requests,
        json=args.json,
        record=args.record,
        redact=tuple(args.redact),
        baseline=args.baseline,
        theme=args.theme,
        export=args.export,
        limits=stream_limits_from(args),
    )


def run(plan: DemoPlan) -> int:
    from specmon.core.errors import RecordingError
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.exporter import Exporter, ExporterError, start_exporter
    from specmon.runtime.hub import Hub, SessionClock
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sim.gpu_page import SIM_GPU_PATH
    from specmon.sim.server import SimConfigError, start_in_thread
    from specmon.sources.gpu import make_sampler
    from specmon.sources.log_lines import KEPT_LOG_LINES, KeptLog, LogLineSource

    # The simulator's log lines are a source like any other: queued from the sim's thread,
    # emitted by the hub (the newest 100 from before the hub started are kept).
    # Stamped on the session's clock (seconds since it started), as every recorded event is.
    # The app shows them with l / ctrl+l (the newest kept in memory: the simulator writes no file).
    clock = SessionClock()
    logs = LogLineSource(max_pending=100, clock=clock)
    kept = KeptLog(f"in memory, the newest {KEPT_LOG_LINES} lines")

    def sink(line: str) -> None:
        logs.push(line)
        kept.push(line)

    try:
        sim = start_in_thread(plan.sim, log_sink=sink)
    except (SimConfigError, ValueError) as exc:
        return fail(NAME, str(exc))
    logs.source = sim.url
    # Under a thermal drift the simulator's GPU (labelled simulated) is read as a dcgm-exporter
    # page, so the panel shows it heat and throttle and the thermal attribution names it.
    gpu = f"{sim.url}{SIM_GPU_PATH}" if sim.app.engine.drift.heat_s is not None else "none"
    from specmon.runtime.terminal import wants_app  # a terminal, or a browser (specmon web)

    if wants_app() and not plan.json:
        try:
            known = simulated_identity(plan.sim)
            return _app(sim.url, plan, known, gpu=gpu, server_log=kept)
        finally:
            sim.stop()
    monitor: Monitor | None = None
    exporter: Exporter | None = None
    try:
        monitor = Monitor(
            [Target(sim.url)],
            state_factory(plan.baseline),
            interval=1.0,
            record=plan.record,
            redact=plan.redact,
            hub=Hub(clock=clock),
            stream_limits=plan.limits,
            gpu=make_sampler(gpu),
        )
        export = plan.export
        if export is not None:
            try:
                exporter = start_exporter(export, monitor.view, "demo")
            except ExporterError as exc:
                return fail(NAME, str(exc))
        try:
            monitor.start()
        except RecordingError as exc:
            return fail(NAME, str(exc))
        monitor.run_source(logs.run)
        return _drive(monitor, plan)
    finally:
        if monitor is not None:
            monitor.stop()
        if exporter is not None:
            exporter.stop()
        sim.stop()


def simulated_identity(config: SimConfig) -> SessionInfo:
    """What the simulator runs as, which a server does not announce (vLLM neither): its
    profile's method and draft model and its K, for the panel (shown as the simulator's; a
    simulator without speculation, n_spec 0, has neither)."""
    from specmon.core.events import SessionInfo
    from specmon.sim.profiles import get_profile
    from specmon.sim.server import resolve

    resolved = resolve(config)
    profile = get_profile(resolved.profile_name)
    spec = resolved.n_spec > 0
    return SessionInfo(
        method=profile.method if spec else None,
        draft_model=profile.draft_model if spec else None,
        n_spec=resolved.n_spec,
        simulated=True,
    )


def _app(
    url: str,
    plan: DemoPlan,
    known: SessionInfo | None = None,
    *,
    gpu: str = "none",
    server_log: LogSource | None = None,
) -> int:
    """On a terminal: the chat app against the simulator, sending the demo prompts one after
    another (the user's own prompts go next), SIMULATED on screen at all times; l / ctrl+l
    shows the simulator's log (`server_log`). The collector runs in its own process; the
    simulator stays on its thread here."""
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import SessionConfig
    from specmon.ui.app_runner import Dashboard, run_dashboard
    from specmon.ui.conversation import ChatSettings

    config = SessionConfig(
        (Target(url),),
        record=plan.record,
        redact=plan.redact,
        quiet=True,
        stream_limits=plan.limits,
        known=known,
        gpu=gpu,
        baseline_tok_s=plan.baseline,
    )
    dashboard = Dashboard(
        NAME,
        "demo",
        theme=plan.theme,
        export=plan.export,
        settings=ChatSettings(max_tokens=plan.max_tokens),
        auto_prompts=DEMO_PROMPTS,
        max_answers=plan.requests,
        idle_timeout_s=plan.limits.idle_timeout_s,
    )
    return run_dashboard(lambda: config, dashboard, server_log=server_log)


def _drive(monitor: Monitor, plan: DemoPlan) -> int:
    from specmon.sources.stream_client import ChatRequest
    from specmon.ui.app_runner import show_console

    url = monitor.targets[0].base
    requests = [ChatRequest(prompt=p, max_tokens=plan.max_tokens) for p in DEMO_PROMPTS]
    done = threading.Event()
    loop = monitor.prompt_loop(
        requests, count=plan.requests, name_requests=plan.sim.truth is not None
    )
    loop.add_done_callback(lambda _f: done.set())
    interrupted = False
    try:
        if not plan.json:
            show_console(monitor, done=done, banner=f"[SIMULATED] specmon demo against {url}")
        else:
            while not done.wait(0.25):  # timed: the main thread stays responsive to signals
                pass
    except KeyboardInterrupt:
        interrupted = True
    loop.cancel()
    if not interrupted and loop.done() and not loop.cancelled() and loop.exception() is not None:
        return fail(NAME, f"the prompt loop failed: {loop.exception()}", 1)
    if plan.json:
        print(json.dumps(monitor.snapshot()))
    return 130 if interrupted else 0
