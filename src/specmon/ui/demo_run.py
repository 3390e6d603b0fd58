"""`specmon demo`'s session once its simulator runs (cli/demo_cmd.py starts the simulator: only
the command line may): the chat app against it sending the demo's prompts, or without a terminal
the prompt loop on the hub with plain lines or the final JSON; everything labelled SIMULATED."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.runtime.one_line import fail

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx/rich
    from specmon.core.events import SessionInfo
    from specmon.runtime.hub import SessionClock
    from specmon.runtime.monitor import Monitor
    from specmon.sources.log_lines import KeptLog, LogLineSource
    from specmon.ui.host import LogSource

NAME = "demo"

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


@dataclass(frozen=True, slots=True)
class DemoShow:
    """What the demo sends, shows and writes once its simulator runs (`DemoPlan.show`)."""

    max_tokens: int = 256
    requests: int | None = None
    json: bool = False
    record: str | None = None
    redact: tuple[str, ...] = ()
    baseline: float | None = None
    theme: str | None = None
    export: tuple[str, int] | None = None
    limits: StreamLimits = DEFAULT_LIMITS
    name_requests: bool = False
    """The simulator writes its ground truth (--truth): the loop's requests carry ids."""


def run_demo(
    url: str,
    show: DemoShow,
    known: SessionInfo,
    *,
    gpu: str,
    logs: LogLineSource,
    kept: KeptLog,
    clock: SessionClock,
) -> int:
    """The demo against the simulator running at `url` (cli/demo_cmd.py starts and stops it):
    the chat app on a terminal (or a browser), else the prompt loop on the hub with plain lines
    or, with --json, the final snapshot. `logs` and `kept`: the simulator's log lines, as a
    source and kept for the app's log view; `clock`: the session's."""
    from specmon.core.errors import RecordingError
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.exporter import Exporter, ExporterError, start_exporter
    from specmon.runtime.hub import Hub
    from specmon.runtime.monitor import Monitor, Target
    from specmon.runtime.terminal import wants_app  # a terminal, or a browser (specmon web)
    from specmon.sources.gpu import make_sampler

    if wants_app() and not show.json:
        return _app(url, show, known, gpu=gpu, server_log=kept)
    monitor: Monitor | None = None
    exporter: Exporter | None = None
    try:
        monitor = Monitor(
            [Target(url)],
            state_factory(show.baseline),
            baseline=show.baseline,
            interval=1.0,
            record=show.record,
            redact=show.redact,
            hub=Hub(clock=clock),
            stream_limits=show.limits,
            gpu=make_sampler(gpu),
        )
        export = show.export
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
        return _drive(monitor, show)
    finally:
        if monitor is not None:
            monitor.stop()
        if exporter is not None:
            exporter.stop()


def _app(
    url: str,
    plan: DemoShow,
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


def _drive(monitor: Monitor, plan: DemoShow) -> int:
    from specmon.sources.stream_client import ChatRequest
    from specmon.ui.app_runner import show_console

    url = monitor.targets[0].base
    requests = [ChatRequest(prompt=p, max_tokens=plan.max_tokens) for p in DEMO_PROMPTS]
    done = threading.Event()
    loop = monitor.prompt_loop(requests, count=plan.requests, name_requests=plan.name_requests)
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
