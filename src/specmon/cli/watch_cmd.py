"""`specmon watch`: attach to one or more running vLLM servers and show what they do.

`--once --json` prints one snapshot (docs/watch-json.md) and exits; `--json` prints one snapshot
line per interval until interrupted; on a terminal the app's dashboard screen (keys: r records,
m adds a marker, F4 lists the answers, ctrl+q quits); otherwise plain lines. Servers that are
down are shown as down. For https servers whose certificate comes from a private CA, point
SSL_CERT_FILE (or SSL_CERT_DIR) at the CA.

Exit status: 0 after `--once`, or when the reader of `--json` lines goes away (a closed pipe, as
with `| head`); 130 when interrupted (Ctrl-C / SIGINT) and 143 on SIGTERM, after the sources are
stopped and the recording is closed (within 2 s; a second Ctrl-C exits at once); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from specmon.cli.session_setup import (
    add_baseline_argument,
    default_gpu_source,
    gpu_sampler,
    state_factory,
)
from specmon.core.watch_json import snapshot_of

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx
    from specmon.runtime.monitor import Monitor, Target

MIN_INTERVAL_S = 0.1
"""Shortest --interval accepted: faster scraping only loads the server (vLLM's own log cadence
is seconds)."""
MAX_INTERVAL_S = 3600.0
"""Longest --interval accepted (an hour): an unbounded one (inf, 1e308) overflowed the wait."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "watch",
        help="attach to running vLLM servers: live tok/s, acceptance, GPU, flags",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--attach",
        action="append",
        required=True,
        metavar="URL",
        help="server base URL, e.g. http://gpu-box:8000 (repeat for several servers)",
    )
    p.add_argument(
        "--metrics-url",
        action="append",
        default=[],
        metavar="URL",
        help="where a server's /metrics page is when not at URL/metrics (paired with --attach "
        "in order)",
    )
    p.add_argument(
        "--api-key",
        default=None,
        help="API key (default: $OPENAI_API_KEY or $VLLM_API_KEY); never printed or recorded",
    )
    p.add_argument(
        "--gpu",
        default=None,
        metavar="local|none|DCGM_URL",
        help="GPU numbers from local NVML, a dcgm-exporter URL, or none (default: local when "
        "every attached server runs on this machine, else none)",
    )
    add_baseline_argument(p)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between scrapes")
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="JSON output (one line per snapshot)")


def _error(message: str) -> int:
    print(f"specmon watch: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from specmon.core.errors import RecordingError
    from specmon.runtime.monitor import Monitor, pair_targets

    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:
        return _error(
            f"--interval must be a number of seconds from {MIN_INTERVAL_S:g} to "
            f"{MAX_INTERVAL_S:g}, got {args.interval}"
        )
    if args.once and not args.json:
        args.json = True  # one snapshot is only meaningful as data
    gpu = args.gpu if args.gpu is not None else default_gpu_source(args.attach)
    if gpu not in ("local", "none") and not gpu.startswith(("http://", "https://")):
        return _error(f"--gpu must be local, none or a dcgm-exporter http(s) URL, got {gpu!r}")
    try:
        targets = pair_targets(args.attach, args.metrics_url)
    except ValueError as exc:
        return _error(str(exc))
    from specmon.cli.app_runner import wants_app  # a terminal, or a browser (specmon web)

    if not args.json and wants_app():
        return _app(targets, gpu, args)
    try:
        monitor = Monitor(
            targets,
            state_factory(args.baseline),
            api_key=args.api_key,
            gpu=gpu_sampler(gpu),
            interval=args.interval,
            record=args.record,
        )
    except ValueError as exc:
        return _error(str(exc))
    try:
        try:
            monitor.start(run_loops=not args.once)
        except RecordingError as exc:
            return _error(str(exc))
        if args.once:
            return _once(monitor)
        if args.json:
            return _json_lines(monitor)
        return _live(monitor)
    except KeyboardInterrupt:
        return 130
    finally:
        monitor.stop()


def _app(targets: list[Target], gpu: str, args: argparse.Namespace) -> int:
    """On a terminal: the app's dashboard screen (the chat's side panel, full-width), with the
    collector in its own process."""
    from specmon.cli.app_runner import run_app
    from specmon.runtime.session import CollectorProcess, SessionConfig
    from specmon.ui.app.app import SpecmonApp
    from specmon.ui.app.session_port import SessionPort

    config = SessionConfig(
        tuple(targets),
        api_key=args.api_key,
        gpu=gpu,
        interval=args.interval,
        record=args.record,
        quiet=True,
    )

    def make_session() -> CollectorProcess:
        return CollectorProcess(config, state_factory(args.baseline))

    port = SessionPort(make_session, api_key=args.api_key, require_model=False)
    app = SpecmonApp(port, mode="watch")
    return run_app(app, port)


def _once(monitor: Monitor) -> int:
    """Two scrapes one interval apart (so windowed rates exist), then one snapshot."""
    monitor.scrape_all_once()
    threading.Event().wait(monitor.interval)
    monitor.scrape_all_once()
    print(json.dumps(snapshot_of(monitor.view(fresh=True))))
    return 0


def _json_lines(monitor: Monitor) -> int:
    """One snapshot line per interval until interrupted (130) or the reader goes away (0)."""
    stop = threading.Event()
    try:
        while not stop.wait(monitor.interval):
            print(json.dumps(snapshot_of(monitor.view())), flush=True)
    except BrokenPipeError:
        # The reader closed the pipe: stop quietly. Point stdout at devnull so the interpreter's
        # final flush does not fail again (Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def _live(monitor: Monitor) -> int:
    from specmon.ui.live_console import run_live, run_plain

    done = threading.Event()
    servers = ", ".join(t.base for t in monitor.targets)
    if sys.stdout.isatty():
        run_live(
            monitor.view,
            title=f"specmon watch — {servers}",
            done=done,
            final_view=lambda: monitor.view(fresh=True),
        )
    else:
        run_plain(
            monitor.view,
            done=done,
            write=lambda s: print(s, flush=True),
            final_view=lambda: monitor.view(fresh=True),
        )
    return 0
