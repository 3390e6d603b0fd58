"""Host mode's plan and launch for `specmon serve` and `specmon chat --model`, with their one-line
errors and exit codes; the rest of the start-up (waiting, the app's view of the server, the
stop) is runtime/host_launch.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from specmon.cli.args import fail

if TYPE_CHECKING:
    from specmon.runtime.host_plan import HostFlags, HostPlan
    from specmon.sources.host.process import HostedServer


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
