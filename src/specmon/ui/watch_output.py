"""The output of `specmon watch` and `specmon fleet` without the app: one snapshot (`--once`,
the servers table or JSON), JSON lines (`--json`), or the Rich console; specmon's /metrics
(`--export`) served meanwhile."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from specmon.core.watch_json import snapshot_of
from specmon.runtime.one_line import fail

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import openai/httpx
    from specmon.core.views import SessionView
    from specmon.runtime.fleet_run import FleetSpec
    from specmon.runtime.monitor import Monitor
    from specmon.sources.prometheus_fleet import PrometheusFleet


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
