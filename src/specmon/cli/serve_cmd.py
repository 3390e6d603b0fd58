"""`specmon serve`: start a vLLM server with speculative decoding and watch it live.

Builds `vllm serve` with a valid --speculative-config (dflash by default when --draft is given),
checks before launch (vLLM present, port free, GPU memory against the preset, the arguments
through vLLM's own parser), starts it in its own process group with its log in a file, shows the
startup progress until /health answers 200, then the live dashboard until Ctrl-C. On Ctrl-C,
SIGTERM, SIGHUP or a crash the whole group is stopped (TERM, then KILL after a grace period); if
specmon itself is killed, a watchdog process stops it.

Exit status: 0 after --dry-run; 130 after Ctrl-C, 143 after SIGTERM (the server stopped);
1 when the server failed to start or died (its last 50 log lines and the likely cause are
printed); 2 for bad arguments or a failed pre-launch check.
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from specmon.cli.host_args import add_host_arguments
from specmon.cli.session_setup import add_baseline_argument

if TYPE_CHECKING:
    from specmon.cli.host_args import HostPlan
    from specmon.core.events import SessionInfo
    from specmon.runtime.hub import Hub
    from specmon.sources.host.process import HostedServer


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="start vLLM with speculative decoding (DFlash, EAGLE-3, MTP, ngram, draft model) "
        "and watch it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_arguments(p)
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    p.add_argument(
        "--gpu",
        choices=("local", "none"),
        default="local",
        help="GPU numbers from local NVML (default) or none",
    )
    p.add_argument("--interval", type=float, default=1.0, help="seconds between /metrics scrapes")
    add_baseline_argument(p)


class _Terminated(Exception):
    """SIGTERM or SIGHUP arrived: stop everything like Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise _Terminated(signum)


def _error(message: str) -> int:
    print(f"specmon serve: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from specmon.cli.host_args import dry_run_text, launch_host, plan_host
    from specmon.core.errors import SpecmonError

    if not 0.1 <= args.interval <= 3600:
        return _error(
            f"--interval must be a number of seconds from 0.1 to 3600, got {args.interval}"
        )
    try:
        plan = plan_host(args, launching=not args.dry_run)
    except SpecmonError as exc:
        return _error(str(exc))
    for warning in plan.warnings:
        print(warning, file=sys.stderr)
    if args.dry_run:
        print(dry_run_text(plan))
        return 0
    from specmon.runtime import shutdown
    from specmon.sources.host.process import DEFAULT_GRACE_S

    process_shutdown = shutdown.current()
    if process_shutdown is not None:  # stopping vLLM's group may take its whole grace period
        process_shutdown.grace_s = max(process_shutdown.grace_s, DEFAULT_GRACE_S + 5.0)
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _host(args, plan, launch_host)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _host(args: argparse.Namespace, plan: HostPlan, launch_host: Any) -> int:
    from specmon.core.errors import RecordingError
    from specmon.core.events import ServerLogLine
    from specmon.core.server_state import MAX_LOG_TAIL
    from specmon.runtime.hub import Hub
    from specmon.runtime.recorder import Recorder
    from specmon.sources.host.process import (
        DEFAULT_READY_TIMEOUT_S,
        HostStartError,
        default_log_path,
    )

    hub = Hub().start()
    source = plan.command.base_url
    early: collections.deque[ServerLogLine] = collections.deque(maxlen=MAX_LOG_TAIL)

    def keep(event: Any) -> None:  # the startup lines, for the dashboard's log once it starts
        if isinstance(event, ServerLogLine):
            early.append(event)

    hub.subscribe(keep)

    def post(line: str) -> None:
        if hub.running:
            try:
                hub.post(ServerLogLine(t=hub.clock(), source=source, line=line))
            except RuntimeError:  # the hub is stopping
                return

    server: HostedServer | None = None
    if plan.log_path is None:
        plan.log_path = default_log_path(plan.settings.port)
    try:
        if args.record:
            # Subscribed before launch, so the recording has every line vLLM prints.
            try:
                recorder = Recorder(args.record, plan.session_info(), secrets=plan.command.secrets)
            except RecordingError as exc:
                print(f"specmon serve: {exc}", file=sys.stderr)
                return 2
            hub.subscribe(recorder)
            hub.every(0.5, recorder.flush_if_due)
            hub.add_closer(recorder.close)
        try:
            server = launch_host(plan, on_line=post)
        except OSError as exc:
            print(f"specmon serve: cannot start {plan.command.argv[0]}: {exc}", file=sys.stderr)
            return 2
        print(f"vLLM log: {server.log_path}", file=sys.stderr)
        print(
            f"vLLM pid {server.pid} (process group {server.pgid}) at {server.base_url}",
            file=sys.stderr,
            flush=True,
        )
        shown: list[str] = []

        def progress(p: Any) -> None:
            if not shown or shown[-1] != p.words:
                shown.append(p.words)
                print(f"[startup] {p.words}", file=sys.stderr, flush=True)

        try:
            ready = server.wait_ready(
                args.ready_timeout or DEFAULT_READY_TIMEOUT_S, on_progress=progress
            )
        except HostStartError as exc:
            print(exc.report(), file=sys.stderr)
            return 1
        info = plan.session_info(ready)
        server.session_info = info
        return _dashboard(args, hub, server, info, early)
    except KeyboardInterrupt:
        return 130
    except _Terminated as exc:
        return 128 + exc.signum
    finally:
        # Stop the server first (its last lines still reach the hub), then the hub: the
        # recorder's closer fsyncs the file.
        if server is not None:
            report = server.stop()
            if report.survivors:
                print(
                    f"specmon serve: processes of group {server.pgid} survived SIGKILL: "
                    f"{list(report.survivors)}",
                    file=sys.stderr,
                )
            else:
                print(f"vLLM stopped (process group {server.pgid} gone)", file=sys.stderr)
        hub.stop()


def _dashboard(
    args: argparse.Namespace,
    hub: Hub,
    server: HostedServer,
    info: SessionInfo,
    early: collections.deque[Any],
) -> int:
    from dataclasses import replace

    from specmon.cli.session_setup import gpu_sampler, state_factory
    from specmon.runtime.monitor import Monitor, Target
    from specmon.ui.live_console import run_live, run_plain

    make_state = state_factory(args.baseline)

    def factory(identified: Any) -> Any:
        # What host mode knows (draft, method, K, command, preset) completes what the server
        # says about itself (/version, /v1/models); the startup lines fill the log.
        merged = replace(
            identified,
            model=identified.model or info.model,
            draft_model=info.draft_model,
            method=info.method,
            n_spec=info.n_spec,
            vllm_version=identified.vllm_version or info.vllm_version,
            gpu=identified.gpu or info.gpu,
            extra={**identified.extra, **info.extra},
        )
        state = make_state(merged)
        for event in hub.read(lambda: list(early)):
            state.apply(event)
        return state

    monitor = Monitor(
        [Target(server.base_url)],
        factory,
        gpu=gpu_sampler(args.gpu),
        interval=args.interval,
        hub=hub,
    )
    monitor.start()
    done = threading.Event()

    def watch_exit() -> None:  # the dashboard ends when the server dies
        server.process.wait()
        done.set()

    threading.Thread(target=watch_exit, name="vllm-exit", daemon=True).start()
    title = f"specmon serve — {info.model} at {server.base_url}"
    if sys.stdout.isatty():
        run_live(monitor.view, title=title, done=done, final_view=lambda: monitor.view(fresh=True))
    else:
        print(f"ready: {server.base_url} (Ctrl-C stops the server)", flush=True)
        run_plain(
            monitor.view,
            done=done,
            write=lambda s: print(s, flush=True),
            final_view=lambda: monitor.view(fresh=True),
        )
    code = server.poll()
    if code is not None:
        error = server.failure(f"the server exited with code {code} while serving")
        print(error.report().replace("vLLM did not start: ", "vLLM stopped: "), file=sys.stderr)
        return 1
    return 0
