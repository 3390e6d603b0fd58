"""Running a bench coroutine so that a stop signal ends it the way the runner expects.

The process's bounded shutdown (runtime.shutdown) raises KeyboardInterrupt in the main thread on
the first SIGINT, SIGTERM or SIGHUP. Raised inside a running event loop that exception leaves
`asyncio.run` at once: the run's tasks are cancelled during the loop's teardown and whatever the
coroutine gathered is dropped. `run_interruptible` registers a callback instead that cancels the
coroutine's task: the runner's measured phase catches that cancellation, marks the run interrupted
and returns what it measured.

A signal before the measured phase (identification, prompts, warm-ups), or one that comes after
the coroutine has returned, still raises KeyboardInterrupt from here, so the callers' "nothing
measured" and sweep paths see it as before. Results must be written after a signal, and a
host-mode server stopped: the shutdown's watchdog is given `STOP_GRACE_S` (a second signal still
ends the process at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from specmon.runtime import shutdown

T = TypeVar("T")

STOP_GRACE_S = 10.0
"""Seconds the process may take after a stop signal to finish the run, analyse it and write the
results (and stop a host-mode server) before the watchdog ends it by force."""


def raise_stop_grace() -> None:
    """Give the process's bounded shutdown STOP_GRACE_S (never less than it already has)."""
    process_shutdown = shutdown.current()
    if process_shutdown is not None:
        process_shutdown.grace_s = max(process_shutdown.grace_s, STOP_GRACE_S)


def stop_requested() -> bool:
    """Whether the process has received a stop signal."""
    process_shutdown = shutdown.current()
    return process_shutdown is not None and process_shutdown.requested.is_set()


def run_interruptible(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, where the process's stop signal cancels the coroutine's task (see
    the module docstring). Without the process's shutdown (library use, tests calling `main`
    with a list) this is `asyncio.run`, which cancels the task on Ctrl-C itself."""
    process_shutdown = shutdown.current()
    if process_shutdown is None:
        return asyncio.run(coro)
    if process_shutdown.requested.is_set():
        coro.close()
        raise KeyboardInterrupt
    raise_stop_grace()

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def cancel() -> None:  # in the signal handler: just schedule the cancellation
            if task is not None:
                loop.call_soon_threadsafe(task.cancel)

        process_shutdown.on_signal(cancel)
        try:
            return await coro
        finally:
            process_shutdown.on_signal(None)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if process_shutdown.requested.is_set():
            raise KeyboardInterrupt from None
        raise
