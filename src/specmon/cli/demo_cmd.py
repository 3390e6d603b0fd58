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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specmon.cli.args import PlanError, add_command, fail, pace, positive_int
from specmon.cli.export_args import add_export_argument
from specmon.cli.session_setup import (
    add_baseline_argument,
    add_redact_argument,
    add_theme_argument,
)
from specmon.cli.stream_args import add_stream_args, stream_limits_from
from specmon.sim.drift import DRIFT_SYNTAX
from specmon.ui.demo_run import DemoShow

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx/rich
    from specmon.core.events import SessionInfo
    from specmon.sim.server import SimConfig

DEMO_SCHEDULE = "cycle:5f,1t,3d,1r"

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
    show: DemoShow = field(default_factory=DemoShow)


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
    show = DemoShow(
        max_tokens=args.max_tokens,
        requests=args.requests,
        json=args.json,
        record=args.record,
        redact=tuple(args.redact),
        baseline=args.baseline,
        theme=args.theme,
        export=args.export,
        limits=stream_limits_from(args),
        name_requests=sim.truth is not None,
    )
    return DemoPlan(sim, show)


def run(plan: DemoPlan) -> int:
    from specmon.runtime.hub import SessionClock
    from specmon.sim.gpu_page import SIM_GPU_PATH
    from specmon.sim.server import SimConfigError, start_in_thread
    from specmon.sources.log_lines import KEPT_LOG_LINES, KeptLog, LogLineSource
    from specmon.ui.demo_run import run_demo

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
    try:
        known = simulated_identity(plan.sim)
        return run_demo(sim.url, plan.show, known, gpu=gpu, logs=logs, kept=kept, clock=clock)
    finally:
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
