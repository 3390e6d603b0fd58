"""runtime.shutdown: what the first and the second stop signal do, and the watchdog's forced exit.

The handler is called directly (no signal is sent); `force_exit` is injected, so nothing exits.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from specmon.runtime.shutdown import Shutdown, exit_code_for


class Exits:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


def _quiet(_text: str) -> None:
    return None


def test_exit_codes_follow_the_shell_convention():
    assert exit_code_for(signal.SIGINT) == 130
    assert exit_code_for(signal.SIGTERM) == 143
    assert exit_code_for(signal.SIGHUP) == 129


_HUP_CHILD = (
    "import signal, time\n"
    "from specmon.runtime import shutdown\n"
    "shutdown.install(grace_s=5)\n"
    "try:\n"
    "    print('ready', flush=True)\n"
    "    time.sleep(60)\n"
    "except KeyboardInterrupt:\n"
    "    print('clean stop', flush=True)\n"
    "    shutdown.current().exit_now(shutdown.current().exit_code)\n"
)


@pytest.mark.parametrize("nohup", [False, True], ids=["terminal", "nohup"])
def test_sighup_is_a_clean_stop_unless_the_process_was_started_ignoring_it(nohup: bool):
    """SIGHUP (the terminal closed) is handled like SIGTERM: the clean stop runs, exit 129. A
    process started under `nohup` (SIGHUP ignored) keeps ignoring it."""
    pre = (lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if nohup else None
    proc = subprocess.Popen(
        [sys.executable, "-c", _HUP_CHILD], stdout=subprocess.PIPE, text=True, preexec_fn=pre
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGHUP)
        if nohup:
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(1.0)  # still running: the hang-up was ignored
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 143
        else:
            assert proc.wait(60) == 129
            assert proc.stdout.read().strip() == "clean stop"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_first_signal_raises_keyboard_interrupt_and_second_forces_the_exit():
    exits = Exits()
    shutdown = Shutdown(grace_s=600, force_exit=exits, write_error=_quiet)
    with pytest.raises(KeyboardInterrupt):
        shutdown._handle(signal.SIGTERM, None)
    assert shutdown.requested.is_set() and shutdown.exit_code == 143
    assert exits.codes == []  # the clean stop runs; nothing forced yet
    shutdown._handle(signal.SIGINT, None)
    assert exits.codes == [143]  # the first signal's status
    shutdown.cancel_watchdog()


def test_a_registered_callback_replaces_the_keyboard_interrupt():
    exits = Exits()
    calls: list[str] = []
    shutdown = Shutdown(grace_s=600, force_exit=exits, write_error=_quiet)
    shutdown.on_signal(lambda: calls.append("stop"))
    shutdown._handle(signal.SIGINT, None)  # does not raise
    assert calls == ["stop"] and shutdown.exit_code == 130 and exits.codes == []
    shutdown.cancel_watchdog()


def test_the_watchdog_forces_the_exit_when_the_clean_stop_does_not_finish():
    exits = Exits()
    messages: list[str] = []
    shutdown = Shutdown(grace_s=0.01, force_exit=exits, write_error=messages.append)
    with pytest.raises(KeyboardInterrupt):
        shutdown._handle(signal.SIGINT, None)
    assert exits.called.wait(30)  # a bound on the test, not a timing assertion
    assert exits.codes == [130]
    assert "did not finish" in messages[0]


def test_a_stood_down_watchdog_forces_nothing():
    exits = Exits()
    shutdown = Shutdown(grace_s=0.01, force_exit=exits, write_error=_quiet)
    shutdown.cancel_watchdog()
    with pytest.raises(KeyboardInterrupt):
        shutdown._handle(signal.SIGINT, None)
    assert shutdown._watchdog is not None
    shutdown._watchdog.join(30)
    assert exits.codes == []


def test_a_process_stuck_in_a_non_daemon_thread_still_exits_on_sigterm():
    """The interpreter joins non-daemon threads at exit; the watchdog ends it anyway."""
    code = (
        "import threading, time, os\n"
        "from specmon.runtime import shutdown\n"
        "shutdown.install(grace_s=0.2)\n"
        "threading.Thread(target=time.sleep, args=(3600,)).start()\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    time.sleep(3600)\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_hooks_run_off_the_main_thread_on_the_first_signal_only():
    exits = Exits()
    ran: list[str] = []
    done = threading.Event()
    shutdown = Shutdown(grace_s=600, force_exit=exits, write_error=_quiet)

    def hook() -> None:
        ran.append(threading.current_thread().name)
        done.set()

    def failing() -> None:
        raise RuntimeError("a hook's failure stays quiet")

    shutdown.add_stop_hook(failing)
    shutdown.add_stop_hook(hook)
    with pytest.raises(KeyboardInterrupt):  # the clean stop goes on as without hooks
        shutdown._handle(signal.SIGTERM, None)
    assert done.wait(30)
    assert ran == ["specmon-stop-hook"]
    shutdown._handle(signal.SIGTERM, None)  # the second signal forces; the hook is not run again
    assert exits.codes == [143] and len(ran) == 1
    shutdown.cancel_watchdog()


def test_a_forced_exit_puts_the_terminal_back_first() -> None:
    """A watchdog exit under load (the clean stop over its bound) left the shell in the app's
    alternate screen with mouse reporting on (tests/e2e/test_sighup.py, 1 run in 3 at load): a
    forced end now writes what a Textual app's exit writes, on a terminal, and sets the saved
    terminal modes again."""
    import pty
    import termios

    from specmon.runtime.shutdown import TERMINAL_RESET, restore_terminal

    leader, follower = pty.openpty()
    saved = os.dup(2), os.dup(0)
    try:
        modes = termios.tcgetattr(follower)
        raw = list(modes)
        raw[3] = raw[3] & ~(termios.ECHO | termios.ICANON)  # what an app's raw mode does
        termios.tcsetattr(follower, termios.TCSANOW, raw)
        os.dup2(follower, 2)
        os.dup2(follower, 0)
        restore_terminal(modes)
        assert termios.tcgetattr(follower)[3] & termios.ECHO  # cooked again
    finally:
        os.dup2(saved[0], 2)
        os.dup2(saved[1], 0)
        os.close(follower)
    written = os.read(leader, 4096).decode()
    os.close(leader)
    assert TERMINAL_RESET in written
    assert "\x1b[?1049l" in written and "\x1b[?1003l" in written


@contextlib.contextmanager
def _on_a_pty() -> Iterator[Callable[[], str]]:
    """Standard input and stderr on a new pseudo-terminal (not this process's controlling
    terminal: no job control applies); yields a function that reads what was written to it."""
    import pty

    leader, follower = pty.openpty()
    saved = os.dup(2), os.dup(0)
    os.dup2(follower, 2)
    os.dup2(follower, 0)

    def written() -> str:
        out = b""
        while select.select([leader], [], [], 0)[0]:
            out += os.read(leader, 65536)
        return out.decode()

    try:
        yield written
    finally:
        os.dup2(saved[0], 2)
        os.dup2(saved[1], 0)
        for fd in (follower, leader, *saved):
            os.close(fd)


def test_the_terminal_is_put_back_when_the_app_returns_so_a_later_message_stays() -> None:
    """The shell showed `EXIT=130ted`: "interrupted" was printed after the app, then the exit
    wrote the reset again, whose alternate-screen-off put the cursor back where the app had
    started, and the prompt overwrote the message. The reset now comes when the app returns; the
    exit after the message writes none."""
    from specmon.runtime.shutdown import TERMINAL_RESET

    exits = Exits()
    with _on_a_pty() as written:
        shutdown = Shutdown(grace_s=600, force_exit=exits, write_error=_quiet)
        with shutdown.app_screen():
            pass  # the app runs
        os.write(2, b"interrupted\n")
        shutdown.exit_now(130)
        out = written()
    assert exits.codes == [130]
    assert out.count(TERMINAL_RESET) == 1
    assert out.index(TERMINAL_RESET) < out.index("interrupted")


def test_without_an_app_the_exit_writes_no_screen_sequences() -> None:
    """`specmon sim` in the foreground: leaving an alternate screen that was never entered still
    moves the cursor (to the last saved position, or home) in xterm and tmux."""
    exits = Exits()
    with _on_a_pty() as written:
        shutdown = Shutdown(grace_s=600, force_exit=exits, write_error=_quiet)
        shutdown.exit_now(0)
        out = written()
    assert exits.codes == [0] and "\x1b[" not in out


def test_a_forced_exit_says_why_after_the_terminal_is_put_back() -> None:
    """Written before the reset, the watchdog's message went to the app's screen and was lost."""
    from specmon.runtime.shutdown import TERMINAL_RESET

    def to_stderr(text: str) -> None:
        os.write(2, text.encode())

    exits = Exits()
    with _on_a_pty() as written:
        shutdown = Shutdown(grace_s=0.01, force_exit=exits, write_error=to_stderr)
        with shutdown.app_screen():
            with pytest.raises(KeyboardInterrupt):
                shutdown._handle(signal.SIGTERM, None)
            assert exits.called.wait(30)  # a bound on the test, not a timing assertion
            out = written()
    assert exits.codes == [143]
    assert TERMINAL_RESET in out and "did not finish" in out
    assert out.index(TERMINAL_RESET) < out.index("did not finish")


_HOSTED_HUP_CHILD = (
    "import asyncio, os, signal\n"
    "from specmon.runtime.host_launch import stop_signals\n"
    "from specmon.runtime import shutdown\n"
    "process = shutdown.install(grace_s=60)\n"
    "async def hang_up():\n"
    "    os.kill(os.getpid(), signal.SIGHUP)  # its handler runs inside this task\n"
    "async def app():\n"
    "    asyncio.create_task(hang_up())\n"
    "    for _ in range(3):\n"
    "        await asyncio.sleep(0)\n"
    "    print('the app ran on', flush=True)\n"
    "try:\n"
    "    with stop_signals((signal.SIGHUP,)):\n"
    "        asyncio.run(app())\n"
    "except KeyboardInterrupt:\n"
    "    print('stopped', flush=True)\n"
    "    process.exit_now(process.exit_code)\n"
)


def test_a_hang_up_inside_one_of_the_apps_tasks_stops_a_hosted_command() -> None:
    """Host mode (chat, serve) set its own SIGHUP handler raising Terminated; raised inside one
    of the app's asyncio tasks it ended that task only and the app ran on (`chat` without a
    terminal ignored SIGHUP, 1 run in 2). With the bounded shutdown installed, its handler stays:
    KeyboardInterrupt, which asyncio passes on, and exit 129."""
    proc = subprocess.run(
        [sys.executable, "-c", _HOSTED_HUP_CHILD], capture_output=True, text=True, timeout=120
    )
    assert (proc.returncode, proc.stdout.strip()) == (129, "stopped"), proc.stderr
