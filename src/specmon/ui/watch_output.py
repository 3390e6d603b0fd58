"""`specmon watch` and `specmon fleet` from their plans (read by cli/watch_cmd.py and
cli/fleet_cmd.py): the app's dashboard on a terminal, else the output without the app: one
snapshot (`--once`, the servers table or JSON), JSON lines (`--json`), or the Rich console;
specmon's /metrics (`--export`) served meanwhile."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specmon.runtime.one_line import fail

if TYPE_CHECKING:  # the plans are imported by `specmon --help`: nothing heavy at the top
    from specmon.core.views import SessionView
    from specmon.runtime.fleet_run import FleetSpec
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sources.prometheus_fleet import PrometheusFleet


FLEET_INTERVAL_S = 5.0
"""Default seconds between reads of a Prometheus (its own scrape interval is usually 15 s)."""


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """What `specmon watch --attach ...` does, read from its command line (`plan_from`)."""

    targets: tuple[Target, ...]
    api_key: str | None = field(default=None, repr=False)
    gpu: str = "none"
    baseline: float | None = None
    interval: float = 1.0
    theme: str | None = None
    record: str | None = None
    redact: tuple[str, ...] = ()
    once: bool = False
    json: bool = False
    export: tuple[str, int] | None = None
    canary_s: float | None = None
    canary_relearn: bool = False


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """What `specmon fleet` (or `watch --prometheus`) does, read from its command line."""

    command: str
    """The command as typed ("fleet", or "watch" for `watch --prometheus`): its messages."""
    url: str
    match: str | None = None
    bearer_token_file: str | None = None
    rate_window_s: float = 60.0
    interval: float = FLEET_INTERVAL_S
    baseline: float | None = None
    theme: str | None = None
    record: str | None = None
    redact: tuple[str, ...] = ()
    once: bool = False
    json: bool = False
    export: tuple[str, int] | None = None

    def spec(self) -> FleetSpec:
        from specmon.runtime.fleet_run import FleetSpec

        return FleetSpec(
            self.url,
            self.match,
            self.interval,
            self.rate_window_s,
            bearer_token_file=self.bearer_token_file,
        )


def run_watch(plan: WatchPlan) -> int:
    """`specmon watch --attach ...` from its plan: the app on a terminal (or a browser), else
    one snapshot, JSON lines or plain lines; the exit status."""
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.monitor import Monitor
    from specmon.runtime.terminal import wants_app  # a terminal, or a browser (specmon web)
    from specmon.sources.gpu import make_sampler

    if not plan.json and not plan.once and wants_app():
        return _watch_app(plan)
    try:
        monitor = Monitor(
            plan.targets,
            state_factory(plan.baseline),
            baseline=plan.baseline,
            api_key=plan.api_key,
            gpu=make_sampler(plan.gpu),
            interval=plan.interval,
            record=plan.record,
            redact=plan.redact,
        )
    except ValueError as exc:
        return fail("watch", str(exc))
    return run_monitor(
        monitor,
        "watch",
        plan.export,
        once=plan.once,
        as_json=plan.json,
        canary_s=plan.canary_s,
        canary_relearn=plan.canary_relearn,
    )


def _watch_app(plan: WatchPlan) -> int:
    """On a terminal: the app's dashboard screen (the chat's side panel, full-width), with the
    collector in its own process."""
    from specmon.runtime.session import SessionConfig
    from specmon.ui.app_runner import Dashboard, run_dashboard

    config = SessionConfig(
        plan.targets,
        api_key=plan.api_key,
        gpu=plan.gpu,
        interval=plan.interval,
        record=plan.record,
        redact=plan.redact,
        quiet=True,
        canary_s=plan.canary_s,
        canary_relearn=plan.canary_relearn,
        baseline_tok_s=plan.baseline,
    )
    dashboard = Dashboard("watch", "watch", theme=plan.theme, export=plan.export)
    return run_dashboard(lambda: config, dashboard)


def run_fleet(plan: FleetPlan) -> int:
    """The session's servers are the vLLM targets the Prometheus scrapes: the app on a
    terminal, else one snapshot, JSON lines or plain lines."""
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.monitor import Monitor
    from specmon.runtime.terminal import wants_app  # a terminal, or a browser (specmon web)

    spec = plan.spec()
    if not plan.json and not plan.once and wants_app():
        return _fleet_app(plan, spec)
    monitor = Monitor(
        [],
        state_factory(plan.baseline),
        baseline=plan.baseline,
        interval=plan.interval,
        record=plan.record,
        redact=plan.redact,
    )
    return run_monitor(
        monitor, plan.command, plan.export, once=plan.once, as_json=plan.json, fleet_spec=spec
    )


def _fleet_app(plan: FleetPlan, spec: FleetSpec) -> int:
    """On a terminal: the app's dashboard screen, the fleet source in the collector process."""
    from specmon.runtime.session import SessionConfig
    from specmon.ui.app_runner import Dashboard, run_dashboard

    config = SessionConfig(
        (),
        interval=plan.interval,
        record=plan.record,
        redact=plan.redact,
        quiet=True,
        fleet=spec,
        baseline_tok_s=plan.baseline,
    )
    dashboard = Dashboard(plan.command, "watch", theme=plan.theme, export=plan.export)
    return run_dashboard(lambda: config, dashboard)


def run_monitor(
    monitor: Monitor,
    command: str,
    export: tuple[str, int] | None,
    *,
    once: bool,
    as_json: bool,
    canary_s: float | None = None,
    canary_relearn: bool = False,
    fleet_spec: FleetSpec | None = None,
) -> int:
    """Run a started watch or fleet without the app: one snapshot (`once`), JSON lines, or the
    Rich console, with /metrics served on `export`."""
    from specmon.core.errors import RecordingError
    from specmon.runtime.exporter import Exporter, ExporterError, start_exporter

    exporter: Exporter | None = None
    try:
        if export is not None:
            try:
                exporter = start_exporter(export, monitor.view, command)
            except ExporterError as exc:
                return fail(command, str(exc))
        try:
            monitor.start(run_loops=not once)
        except RecordingError as exc:
            return fail(command, str(exc))
        if canary_s is not None and not once:
            from specmon.runtime.canary import start_canaries

            start_canaries(monitor, canary_s, relearn=canary_relearn)
        if fleet_spec is not None:
            from specmon.runtime.fleet_run import start_fleet

            fleet = start_fleet(monitor, fleet_spec, run_loops=not once)
            if once:
                return _fleet_once(monitor, fleet, command, as_json=as_json)
        if once:
            return _once(monitor, command, as_json=as_json)
        if as_json:
            return _json_lines(monitor)
        return _live(monitor)
    except KeyboardInterrupt:
        return 130
    finally:
        monitor.stop()
        if exporter is not None:
            exporter.stop()


def _print_snapshot(view: SessionView, *, as_json: bool, title: str) -> None:
    """One snapshot: a line of JSON (`--json`), else the app's servers table printed once, at
    the terminal's width (COLUMNS when set)."""
    if as_json:
        from specmon.core.watch_json import snapshot_of

        print(dumps(snapshot_of(view)))
        return
    from rich.console import Console

    from specmon.ui.live_console import once_text

    console = Console(highlight=False)
    console.print(once_text(view, title=title, width=console.width))


def in_given_order(view: SessionView, bases: Sequence[str]) -> SessionView:
    """The view with its servers in the order the command line gave them (the view holds them
    in the order they were first heard from); any other server after them, as it was."""
    rank = {base: n for n, base in enumerate(bases)}
    ordered = sorted(view.servers, key=lambda s: rank.get(s.source, len(rank)))
    return replace(view, servers=tuple(ordered))


def _fleet_once(monitor: Monitor, fleet: PrometheusFleet, command: str, *, as_json: bool) -> int:
    """One read of the Prometheus (its rates need no second read), then one snapshot. Exit 1
    when the Prometheus did not answer (the snapshot says why in its markers)."""
    event = monitor.hub.submit(fleet.read_once(monitor.hub.emit)).result(120)
    view = monitor.view(fresh=True)
    _print_snapshot(view, as_json=as_json, title=f"specmon {command} — Prometheus {fleet.source}")
    if event.error is not None:
        return fail(command, str(event.error), 1)
    return 0


def _once(monitor: Monitor, command: str, *, as_json: bool) -> int:
    """Two scrapes one interval apart (so windowed rates exist), then one snapshot. Every given
    server is in it, with its state and why; exit 1 when none of them could be read."""
    from specmon.core.events import ServerStatusChanged
    from specmon.ui.formatting import clean

    for round_ in range(2):
        if round_:
            threading.Event().wait(monitor.interval)
        try:
            monitor.scrape_all_once()
        except TimeoutError:  # each read has its own deadline; this is only a last resort
            break
    for target, scraper in zip(monitor.targets, monitor.scrapers, strict=False):
        if scraper.status is None:  # nothing heard at all: still listed, and why
            monitor.hub.emit(  # under the hub's lock, so the view below has it
                ServerStatusChanged(
                    t=monitor.hub.clock(),
                    source=target.base,
                    status="down",
                    detail=f"no answer from {target.metrics} within {scraper.deadline_s:g} s",
                )
            )
    view = in_given_order(monitor.view(fresh=True), [t.base for t in monitor.targets])
    title = f"specmon {command} — " + ", ".join(t.base for t in monitor.targets)
    _print_snapshot(view, as_json=as_json, title=title)
    given = {t.base for t in monitor.targets}
    servers = [s for s in view.servers if s.source in given]
    if given and not any(s.status == "up" for s in servers):
        why = "; ".join(f"{s.source}: {s.status} ({s.status_detail})" for s in servers)
        return fail(command, f"no server could be read: {clean(why)}", 1)
    return 0


def dumps(snapshot: dict[str, Any]) -> str:
    """One snapshot as one line of strict JSON: a number that is not finite (none should reach
    here: the views hold None for them) is written null, never NaN or Infinity."""
    try:
        return json.dumps(snapshot, allow_nan=False)
    except ValueError:
        from specmon.core.numbers import finite_json

        return json.dumps(finite_json(snapshot), allow_nan=False)


def _json_lines(monitor: Monitor) -> int:
    """One snapshot line per interval until interrupted (130) or the reader goes away (0)."""
    from specmon.core.watch_json import snapshot_of

    stop = threading.Event()
    try:
        while not stop.wait(monitor.interval):
            print(dumps(snapshot_of(monitor.view())), flush=True)
    except BrokenPipeError:
        # The reader closed the pipe: stop quietly. Point stdout at devnull so the interpreter's
        # final flush does not fail again (Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def _live(monitor: Monitor) -> int:
    from specmon.ui.app_runner import show_console

    show_console(monitor, done=threading.Event())
    return 0
