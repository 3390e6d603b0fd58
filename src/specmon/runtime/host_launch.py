"""Host-mode start-up shared by `specmon serve` and `specmon chat --model`.

    plan_or_exit(flags, "serve")               the plan, or the exit code (--dry-run, a bad flag)
    launch_or_exit(plan, "serve")              the started server, or the exit code
    raise_stop_grace()                         the bounded shutdown waits for the group's stop
    with stop_signals(): ...                   without the bounded shutdown, SIGTERM/SIGHUP raise
                                               Terminated (every way out reaches the caller's
                                               `finally: stop_server(...)`)
    progress = wait_in_text(server, flags)    [startup] lines; the report on a failure
    host = AppHost(server, plan, timeout)      what the app's startup view and log pane read
    stop_server(server, "chat")                TERM, group TERM, KILL; says what is left

The Textual app gets an `AppHost` (what ui.host.HostWatch asks for): it waits for /health 200 in
a worker thread, shows progress and the log, and on a failure shows the tail and the cause.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

from specmon.runtime.host_plan import HostFlags, HostPlan
from specmon.runtime.one_line import fail

if TYPE_CHECKING:
    from specmon.core.events import SessionInfo
    from specmon.core.startup_log import StartupFailed, StartupProgress
    from specmon.sources.host.process import HostedServer


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: stop everything like Ctrl-C does. A BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way (Textual's) swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stopped_status(stop: KeyboardInterrupt | Terminated) -> int:
    """The exit status after a stop: 130 after Ctrl-C, 128 + the signal after SIGTERM/SIGHUP."""
    return 128 + stop.signum if isinstance(stop, Terminated) else 130


def _raise_terminated(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def stop_signals(
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[None]:
    """Within the block, `signals` raise Terminated in the main thread; restored after. Only
    where the process's bounded shutdown is not installed (library use, tests calling `main`
    with a list): where it is, it handles SIGTERM and SIGHUP itself with KeyboardInterrupt, which
    asyncio passes on to the app's caller, while a Terminated raised inside one of the app's tasks
    ended that task only, and the app ran on (chat without a terminal ignored SIGHUP, 1 in 2)."""
    from specmon.runtime import shutdown

    if threading.current_thread() is not threading.main_thread() or shutdown.current():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_stop_grace() -> None:
    """Stopping vLLM's group may take its whole grace period: the process's bounded shutdown
    (runtime.shutdown) must wait that long before it ends the process by force."""
    from specmon.runtime import shutdown
    from specmon.sources.host.process import DEFAULT_GRACE_S

    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        process_shutdown.grace_s = max(process_shutdown.grace_s, DEFAULT_GRACE_S + 5.0)


def ready_timeout(args: HostFlags) -> float:
    from specmon.sources.host.process import DEFAULT_READY_TIMEOUT_S

    return float(args.ready_timeout or DEFAULT_READY_TIMEOUT_S)


def wait_in_text(
    server: HostedServer, args: HostFlags, *, say: Callable[[str], None] = _stderr
) -> StartupProgress | None:
    """Wait for /health 200, saying each new phase (`[startup] ...`); on a failed start say the
    report (last 50 lines, likely cause) and return None."""
    from specmon.sources.host.process import HostStartError

    shown: list[str] = []

    def progress(p: StartupProgress) -> None:
        if not shown or shown[-1] != p.words:
            shown.append(p.words)
            say(f"[startup] {p.words}")

    try:
        return server.wait_ready(ready_timeout(args), on_progress=progress)
    except HostStartError as exc:
        say(exc.report())
        return None


def stop_server(server: HostedServer | None, command: str) -> None:
    """Stop the whole group and say whether anything survived."""
    if server is None:
        return
    report = server.stop()
    if report.survivors:
        print(
            f"specmon {command}: processes of group {server.pgid} survived SIGKILL: "
            f"{list(report.survivors)}",
            file=sys.stderr,
        )
    else:
        print(f"vLLM stopped (process group {server.pgid} gone)", file=sys.stderr)


class AppHost:
    """The hosted server as the app's startup view and log pane see it (HostWatch)."""

    def __init__(
        self,
        server: HostedServer,
        plan: HostPlan,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.plan = plan
        self.timeout_s = timeout_s
        self.exit_on_failure = False
        """Set when not on a terminal: the app ends at once on a failure."""
        self._clock = clock
        self._started = clock()
        self._ready: StartupProgress | None = None
        self._cancels: list[threading.Event] = []
        what = plan.command.spec.method or "no speculation"
        k = plan.command.spec.n_spec
        self.title = (
            f"Starting vLLM: {plan.settings.model} ({what}"
            + (f", K={k}" if k is not None else "")
            + (f", draft {plan.command.spec.draft}" if plan.command.spec.draft else "")
            + (f", preset {plan.preset.name}" if plan.preset else "")
            + ")"
        )

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def log_path(self) -> str:
        return str(self.server.log_path)

    def lines_after(self, seen: int) -> tuple[int, list[str]]:
        return self.server.lines_after(seen)

    def progress(self) -> StartupProgress:
        return self._ready or self.server.progress

    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def mark_ready(self, progress: StartupProgress) -> None:
        """The start was waited for elsewhere (in text, before the app)."""
        self._ready = progress
        self.server.session_info = self.plan.session_info(progress)

    def wait_ready(self, cancel: threading.Event) -> StartupFailed | None:
        from specmon.sources.host.process import HostStartError

        if self._ready is not None:
            return None
        self._cancels.append(cancel)
        try:
            progress = self.server.wait_ready(self.timeout_s, cancel=cancel)
        except HostStartError as exc:
            return exc.failure()
        self.mark_ready(progress)
        return None

    def abort(self) -> None:
        """Stop waiting (the app is closing)."""
        for cancel in self._cancels:
            cancel.set()

    def exit_failure(self) -> StartupFailed | None:
        code = self.server.poll()
        if code is None:
            return None
        error = self.server.failure(f"the server exited with code {code} while serving")
        return error.failure(after_ready=True)

    def session_info(self) -> SessionInfo:
        """The recording header's host fields (with the version the log named, once ready)."""
        return self.plan.session_info(self._ready)


def plan_or_exit(
    args: HostFlags, command: str, *, say: Callable[[str], None] = _stderr
) -> HostPlan | int:
    """Resolve presets and flags and run the pre-launch checks. Returns the plan, or the exit
    code: 0 after --dry-run (the command and environment printed), 2 for bad input or a failed
    check (one line on stderr)."""
    from specmon.core.errors import SpecmonError
    from specmon.runtime.host_plan import dry_run_text, plan_host

    try:
        plan = plan_host(args, launching=not args.dry_run, say=say)
    except SpecmonError as exc:
        return fail(command, str(exc))
    for warning in plan.warnings:
        say(warning)
    if args.dry_run:
        print(dry_run_text(plan))
        return 0
    return plan


def launch_or_exit(
    plan: HostPlan,
    command: str,
    *,
    on_line: Callable[[str], None] | None = None,
    say: Callable[[str], None] = _stderr,
) -> HostedServer | int:
    """Start the planned server; 2 when it cannot be executed. Says where its log goes."""
    from specmon.runtime.host_plan import launch_host

    try:
        server = launch_host(plan, on_line=on_line)
    except OSError as exc:
        return fail(command, f"cannot start {plan.command.argv[0]}: {exc}")
    say(f"vLLM log: {server.log_path}")
    say(f"vLLM pid {server.pid} (process group {server.pgid}) at {server.base_url}")
    return server
