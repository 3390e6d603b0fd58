"""`specmon sim`: run the simulated DFlash vLLM server in the foreground until Ctrl-C/SIGTERM.

The first Ctrl-C, SIGTERM or SIGHUP stops serving and closes every connection, then exits with
status 0 (the usual way to stop a server); a second one, or a stop that takes longer than 1.5 s,
ends the process at once with 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specmon.cli.args import PlanError, fail
from specmon.sim.profiles import DEFAULT_PROFILE, PROFILES
from specmon.sim.spec_metrics import LEVELS

if TYPE_CHECKING:
    from specmon.sim.server import SimConfig


NAME = "sim"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        NAME,
        help="run the SIMULATED vLLM server (OpenAI API, /metrics, DFlash-like speculation)",
        description=(
            "Run a simulated vLLM server with speculative decoding. Everything it serves is "
            "SIMULATED: /version says so and every response carries X-Specmon-Simulated: 1."
        ),
        epilog="Exit status: 0 after a clean stop (the first Ctrl-C, SIGTERM or SIGHUP); 130, "
        "143 or 129 when a second signal, or a stop longer than 1.5 s, ends it at once; 1 when "
        "it cannot listen; 2 for bad arguments.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"model/GPU profile: {', '.join(sorted(PROFILES))} (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--n-spec", type=int, default=None, help="num_speculative_tokens (default: the profile's)"
    )
    parser.add_argument(
        "--schedule",
        default=None,
        help="degradation schedule, e.g. cycle:5f,1t,3d,1r, drop-at:N or file:PATH (default off)",
    )
    parser.add_argument(
        "--drift",
        default=None,
        help="drifts for the diagnosis views: context:LO:HI[:FLOOR] (acceptance falls with "
        "context), uptime:HALF_LIFE_S, thermal[:HEAT_S] (clock throttles with heat), loop:EVERY, "
        "garble:EVERY; "
        "comma-separated (default none)",
    )
    parser.add_argument(
        "--speed", type=float, default=1.0, help="pace multiplier (10 = ten times faster)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--per-request-spec-decode-metrics",
        choices=LEVELS,
        default="none",
        help="per-request metrics.speculative_decoding in responses, as vLLM's flag (default none)",
    )
    parser.add_argument(
        "--enable-per-request-metrics",
        action="store_true",
        help="per-request timing metrics (queue, TTFT, generation, mean ITL) in responses, "
        "as vLLM's flag",
    )
    parser.add_argument(
        "--engines",
        type=int,
        default=1,
        metavar="N",
        help="data-parallel engines: one `engine` label each on /metrics, requests round-robin "
        "(1..16, default 1)",
    )
    parser.add_argument(
        "--truth",
        metavar="FILE",
        default=None,
        help="write the ground truth of every request (the engine's real state) to FILE as "
        "JSON lines, for scoring verdicts (docs/diagnosis.md, 'Ground truth'); specmon never "
        "reads it",
    )
    parser.add_argument(
        "--log-interval",
        type=float,
        default=None,
        help="seconds between stats log lines (default $VLLM_LOG_STATS_INTERVAL or 10; 0 = off)",
    )


def _log_interval(args: argparse.Namespace) -> float:
    if args.log_interval is not None:
        return float(args.log_interval)
    try:
        return float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
    except ValueError:
        return 10.0


@dataclass(frozen=True, slots=True)
class SimPlan:
    config: SimConfig
    n_spec: int
    """The resolved num_speculative_tokens (the profile's when not given)."""


def plan_from(args: argparse.Namespace) -> SimPlan:
    """The simulator the arguments describe; PlanError (one line, exit 2) for a setting that
    cannot be."""
    from specmon.sim.server import SimConfig, SimConfigError, resolve

    config = SimConfig(
        profile=args.profile,
        n_spec=args.n_spec,
        schedule=args.schedule,
        speed=args.speed,
        seed=args.seed,
        host=args.host,
        port=args.port,
        log_interval=_log_interval(args),
        per_request_spec_decode_metrics=args.per_request_spec_decode_metrics,
        enable_per_request_metrics=args.enable_per_request_metrics,
        engines=args.engines,
        drift=args.drift,
        truth=args.truth,
    )
    try:
        resolved = resolve(config)
    except SimConfigError as err:
        raise PlanError(str(err)) from None
    return SimPlan(config, resolved.n_spec)


def run(plan: SimPlan) -> int:
    import asyncio

    from specmon.sim.server import SimConfigError

    config = plan.config
    try:
        return asyncio.run(_serve(config, plan.n_spec))
    except SimConfigError as err:
        return fail(NAME, str(err))
    except OSError as err:
        print(
            f"specmon sim: cannot listen on {config.host}:{config.port}: {err.strerror}",
            file=sys.stderr,
        )
        return 1


async def _serve(config: SimConfig, n_spec: int) -> int:
    import asyncio

    from specmon.runtime import shutdown
    from specmon.sim.server import SimServer

    server = SimServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        # The process's handlers (bounded stop, second Ctrl-C forces) call back into the loop.
        def request_stop() -> None:
            loop.call_soon_threadsafe(stop.set)

        process_shutdown.on_signal(request_stop)
    else:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
    schedule = config.schedule or "off"
    print(
        f"SIMULATED vLLM server (specmon sim) on {server.url}  profile={config.profile} "
        f"n_spec={n_spec} speed={config.speed:g} schedule={schedule} seed={config.seed}",
        flush=True,
    )
    print("All numbers it serves are SIMULATED. Ctrl-C stops it.", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
    print("specmon sim: stopped", file=sys.stderr, flush=True)
    return 0
