"""Stops one real `vllm serve` process group when the test run that started it dies.

`tests/real_vllm/server.py` starts one guard per server: `python guard.py PGID [SCRATCH]`, in a
session of its own (so a signal to the run's process group or terminal does not reach it), with a
pipe from the run on its standard input. The run writes `release` when it has stopped the server
itself; an end of file without it means the run died (SIGTERM, SIGKILL, a pytest-xdist worker ended
by its controller), and the guard stops the group as `VllmServer.stop` would: SIGTERM to the API
server, then to the whole group, then SIGKILL; then it removes the server's temporary folder
SCRATCH.

Standard library only, and no import from the tests: it runs beside the run, not in it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

RELEASE = "release"
TERM_WAIT_S = 15.0
GROUP_TERM_WAIT_S = 5.0
KILL_WAIT_S = 10.0


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose process group is `pgid`, from /proc (also used by
    the tests that check a group is gone: one reader of /proc for the suite)."""
    members: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
        if int(fields[2]) == pgid:
            members.append((int(entry.name), fields[0]))
    return members


def live_members(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose process group is `pgid`."""
    return [pid for pid, state in group_members(pgid) if state != "Z"]


def _gone(pgid: int, timeout_s: float, leader_only: bool = False) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        members = live_members(pgid)
        if not (pgid in members if leader_only else members):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def stop_group(pgid: int) -> None:
    """SIGTERM to the leader (vLLM's API server shuts its engine down in order), then to the
    group, then SIGKILL to whatever is left."""
    if not live_members(pgid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pgid, signal.SIGTERM)
    _gone(pgid, TERM_WAIT_S, leader_only=True)
    for sig, wait_s in ((signal.SIGTERM, GROUP_TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
        if not live_members(pgid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        if _gone(pgid, wait_s):
            return


def main(argv: list[str]) -> int:
    pgid = int(argv[1])
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a Ctrl-C or a closed terminal ends the run, not us
    if sys.stdin.readline().strip() == RELEASE:
        return 0
    stop_group(pgid)
    if len(argv) > 2 and not live_members(pgid):  # the server's temporary folder
        shutil.rmtree(argv[2], ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
