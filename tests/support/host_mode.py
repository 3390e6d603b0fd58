"""Helpers of the host-mode tests (a fake or the real `vllm serve` started by specmon): the fake
`vllm` executable, what a `specmon` child process printed, the pids the fake wrote and their
liveness, a hosted server's process group, a wide tmux terminal, and the plan → launch → ready
sequence in one call."""

from __future__ import annotations

import argparse
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support import terminal
from tests.support.terminal import TMUX as TMUX  # the host tests' skip conditions
from tests.support.waiting import wait_for

from specmon.core.startup_log import StartupProgress
from specmon.runtime.host_plan import HostFlags, launch_host, plan_host
from specmon.sources.host.checks import pick_free_port
from specmon.sources.host.presets import Preset
from specmon.sources.host.process import DEFAULT_READY_TIMEOUT_S, HostedServer, group_members
from specmon.sources.host.spec import HostSettings, build_command

FAKE = Path(__file__).with_name("fake_vllm.py")

WAIT_LIMIT_S = 120.0
"""Upper bound on waiting for the screen to show something: a failure bound, not a speed target."""


def make_fake_vllm(directory: Path) -> Path:
    """An executable named `vllm` whose `#!` line is this python, running fake_vllm.py."""
    exe = directory / "vllm"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def recorded_pids(tmp_path: Path) -> list[int]:
    """The pids the fake `vllm`'s processes wrote (FAKE_VLLM_PIDS = tmp_path/pids)."""
    path = tmp_path / "pids"
    if not path.exists():
        return []
    return [int(p) for p in path.read_text().split()]


def alive(pid: int) -> bool:
    """True while `pid` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


class Terminal(terminal.Terminal):
    """The shared tmux terminal, 160 columns wide, waiting up to WAIT_LIMIT_S (a hosted server's
    start is slower than the simulator's)."""

    def __init__(self, command: str, exit_file: Path, env: dict[str, str]) -> None:
        super().__init__(command, exit_file, env, width=160, wait_limit_s=WAIT_LIMIT_S)


def output_match(path: Path, pattern: str, proc: subprocess.Popen, timeout_s: float = 120.0) -> str:
    """Wait for `pattern` (a regex) in the file `proc` writes its output to; its first group
    (or the whole match). Fails at once, with the output, when `proc` exits without it."""

    def found() -> re.Match[str] | None:
        exited = proc.poll() is not None  # read after: a last line written before exit counts
        match = re.search(pattern, path.read_text() if path.exists() else "")
        if match is None and exited:
            raise AssertionError(
                f"{pattern!r} not seen; the process exited ({proc.returncode}); output:\n"
                + (path.read_text() if path.exists() else "(no output file)")
            )
        return match

    match = wait_for(
        found,
        f"{pattern!r} in {path.name}",
        timeout=timeout_s,
        detail=lambda: "output:\n" + path.read_text() if path.exists() else "(no output file)",
    )
    return match.group(1) if match.groups() else match.group(0)


def wait_gone(pgid: int, timeout_s: float = 60.0) -> bool:
    """Wait until no process of the group `pgid` is left (True); AssertionError naming the
    survivors after `timeout_s`."""
    return wait_for(
        lambda: not group_members(pgid),
        f"process group {pgid} to end",
        timeout=timeout_s,
        detail=lambda: f"left: {group_members(pgid)}",
    )


def launch_fake(fake: Path, tmp_path: Path, monkeypatch, mode: str, **kwargs) -> HostedServer:
    """Start the fake `vllm` (`FAKE_VLLM_MODE=mode`) as a HostedServer on a free port."""
    monkeypatch.setenv("FAKE_VLLM_MODE", mode)
    settings = HostSettings(
        model="tiny",
        method="ngram",
        port=pick_free_port("127.0.0.1"),
        vllm_args=("--api-key", "sk-fake-secret-123"),
    )
    command = build_command(settings, str(fake))
    return HostedServer.launch(command, tmp_path / "logs" / "vllm.log", **kwargs)


def start_host(
    args: HostFlags | argparse.Namespace,
    *,
    on_progress: Callable[[StartupProgress], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    say: Callable[[str], None],
) -> HostedServer:
    """plan_host, launch_host and wait_ready in one call (the sequence `specmon serve` and
    `chat` run through cli/host_launch.py); a failed start stops the server and raises
    HostStartError. The ready server carries its recording header (`session_info`)."""
    plan = plan_host(args, say=say)
    for warning in plan.warnings:
        say(warning)
    server = launch_host(plan, on_line=on_line)
    say(f"vLLM log: {server.log_path}")
    timeout = args.ready_timeout or DEFAULT_READY_TIMEOUT_S
    try:
        progress = server.wait_ready(timeout, on_progress=on_progress)
    except BaseException:
        server.stop()
        raise
    server.session_info = plan.session_info(progress)
    return server


def settings_of(preset: Preset) -> HostSettings:
    """What host mode runs for a preset given alone (no flags over it)."""
    return HostSettings(
        model=preset.model,
        draft=preset.draft,
        method=preset.method,
        n_spec=preset.n_spec,
        spec_options=preset.spec_options,
        vllm_args=preset.vllm_args,
        env=preset.env,
    )
