"""Bounded shutdown for every long-running command: Ctrl-C, SIGTERM and SIGHUP always end the
process.

`install()` (called first thing by `specmon`'s `main`) puts one handler on SIGINT, SIGTERM and
SIGHUP (the terminal closed: handled like SIGTERM, so a Textual app restores the terminal and a
command stops what it started instead of dying where it stands):

- the first signal starts a clean stop: by default it raises KeyboardInterrupt in the main thread
  (so the command's `finally` blocks stop the hub, close the recording, stop the simulator), or,
  when a command has registered `on_signal(callback)`, it calls that callback instead (`specmon
  sim` sets its loop's stop event); it also arms a watchdog;
- the watchdog (a daemon thread) ends the process with `os._exit` when the clean stop has not
  finished within `grace_s` seconds, whatever is still running (a stuck scrape, an NVML call, a
  non-daemon thread joined by the interpreter at exit);
- a second signal ends the process at once.

A forced end (the watchdog, a second signal) first puts the terminal back as a Textual app's
clean exit would (`restore_terminal`: the alternate screen left, mouse reporting and bracketed
paste off, the cursor shown, the terminal modes saved at `install()` set again), so a process
ended by force never leaves the shell in the app's screen; what it says about the exit comes
after that, on the shell's screen. The screen's sequences are written only while a Textual app
is on it (`app_screen`, around its run), and right after the app returns, so that what the
command prints after the app stays on the shell's screen (leaving the alternate screen moves
the cursor back to where the app started: a message printed before it was overwritten by the
shell's prompt).

The terminal is touched only when it is this process's to touch: a command started in the
background of a shell (`specmon sim > log 2>&1 &`) still has the shell's terminal as its
standard input, and setting its modes (or writing to it, with `stty tostop`) from the background
would stop the process with SIGTTOU (`Stopped (tty output)`) instead of ending it. The terminal
is put back only when this process's group is in its foreground (`os.tcgetpgrp`), with SIGTTOU
blocked around the calls in case that changes in between.

Exit status: 130 after SIGINT, 143 after SIGTERM and 129 after SIGHUP (128 + the signal's
number, the shell's convention), both for a clean stop and for a forced one (`specmon sim`, a
server, exits 0 after a clean stop). `bench` and `sweep` (bench.interruptible) give the clean stop
more time, to write what they measured. Once the command's clean stop is done, `main` ends the
process with `exit_now`, skipping the interpreter's teardown, which under load alone can take
longer than the bound.

Python runs signal handlers in the main thread only, between bytecodes; a main thread that is
blocked in C (a lock without timeout, a join) runs it only when that call returns. The watchdog
does not depend on the main thread: it is armed from the handler and counts on its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

DEFAULT_GRACE_S = 1.5
"""Time a clean stop may take after the first signal before the process is ended by force (the
promise is an exit within 2 s of Ctrl-C, with room for a loaded machine)."""

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

TERMINAL_RESET = (
    "\x1b[?1049l"  # leave the alternate screen
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"  # mouse reporting off
    "\x1b[?2004l"  # bracketed paste off
    "\x1b[?25h"  # show the cursor
)
"""What a Textual app's exit writes to put the terminal back (harmless when it was not used)."""


def _tty_modes() -> list[Any] | None:
    """The terminal modes of standard input now (None: not a terminal)."""
    try:
        return termios.tcgetattr(0) if os.isatty(0) else None
    except (OSError, termios.error):
        return None


def owns_terminal(fd: int) -> bool:
    """Whether `fd` is a terminal that this process may write to and set without being stopped
    for it: one whose foreground process group is this process's, or one that is not this
    process's controlling terminal (no job control applies to it). False for a command started
    in the background of a shell, whose standard input is still the shell's terminal."""
    try:
        if not os.isatty(fd):
            return False
    except (OSError, ValueError):
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # ENOTTY: not the controlling terminal; EIO: hung up (writes fail quietly)
        return True


@contextlib.contextmanager
def _sigttou_blocked() -> Iterator[None]:
    """SIGTTOU blocked in the calling thread (any thread): a terminal call made from the
    background goes through instead of stopping the process (the kernel sends no SIGTTOU to a
    thread that blocks it)."""
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        if signal.SIGTTOU not in before:
            with contextlib.suppress(OSError, ValueError):
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTTOU})


def restore_terminal(modes: list[Any] | None, *, screen: bool = True) -> None:
    """Put the terminal back: TERMINAL_RESET (when `screen`: an app may have left it in its
    screen) on the first of stderr and stdout that is a terminal, and the saved `modes` (cooked
    input, echo) on standard input; each only when this process may (`owns_terminal`), never
    stopping it. Never raises: the terminal may already be gone (SIGHUP)."""
    with _sigttou_blocked():
        if screen:
            for fd in (2, 1):
                try:
                    if owns_terminal(fd):
                        os.write(fd, TERMINAL_RESET.encode())
                        break
                except OSError:
                    continue
        if modes is not None and owns_terminal(0):
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(0, termios.TCSANOW, modes)


def exit_code_for(signum: int) -> int:
    """The shell's exit status for a process ended by `signum` (130 for SIGINT, 143 SIGTERM,
    129 SIGHUP)."""
    return 128 + int(signum)


class Shutdown:
    """The process's stop request: which signal came, when, and what to do about it."""

    def __init__(
        self,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        force_exit: Callable[[int], None] = os._exit,
        write_error: Callable[[str], None] | None = None,
    ) -> None:
        self.grace_s = grace_s
        self.requested = threading.Event()
        """Set by the first signal (commands may wait on it instead of sleeping)."""
        self.signum: int | None = None
        self._force_exit = force_exit
        self._write_error = write_error or _write_stderr
        self._callback: Callable[[], None] | None = None
        self._hooks: list[Callable[[], None]] = []
        self._count = 0
        self._watchdog: threading.Thread | None = None
        self._done = threading.Event()
        self._tty_modes: list[Any] | None = None
        self._screen_on = False

    # ------------------------------------------------------------ wiring

    def install(self) -> None:
        """Handle SIGINT, SIGTERM and SIGHUP in this process (main thread only; else a no-op). A
        SIGHUP that is ignored when the process starts (`nohup`) stays ignored."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._tty_modes = _tty_modes()
        for sig in SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            signal.signal(sig, self._handle)

    def on_signal(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` on the first signal instead of raising KeyboardInterrupt (None: raise
        again). The callback runs in the main thread, inside the signal handler: keep it short
        (set an event, call_soon_threadsafe)."""
        self._callback = callback

    def add_stop_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook` on the first signal, in a thread of its own (it may block), besides the
        clean stop: e.g. to abandon a connection still being made, which the main thread's
        clean stop would otherwise wait for."""
        self._hooks.append(hook)

    @property
    def exit_code(self) -> int | None:
        """130, 143 or 129 once a signal came, else None."""
        return exit_code_for(self.signum) if self.signum is not None else None

    @contextlib.contextmanager
    def app_screen(self) -> Iterator[None]:
        """Around a Textual app's run. While it runs, a forced exit writes TERMINAL_RESET. When
        it returns or raises, the terminal is put back at once, before the command prints
        anything more: Textual's driver writes its last sequences from a thread of its own, and
        under load ending the process lost the last one (the shell was left in the alternate
        screen, 1 run in 3 of tests/e2e/test_sighup.py); written later, after a message, the
        reset would move the cursor back over that message."""
        self._screen_on = True
        try:
            yield
        finally:
            self._screen_on = False
            restore_terminal(self._tty_modes)

    def exit_now(self, code: int) -> None:
        """Flush stdout and stderr and end the process with `code` (after a clean stop), the
        terminal modes saved at `install()` set again (and the screen put back if an app is
        still on it)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                continue
        restore_terminal(self._tty_modes, screen=self._screen_on)
        self._force_exit(code)

    def cancel_watchdog(self) -> None:
        """Stand the watchdog down (for tests; a command lets it run through the exit)."""
        self._done.set()

    # ------------------------------------------------------------ the handler

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self._count += 1
        if self._count > 1:
            code = exit_code_for(self.signum if self.signum is not None else signum)
            restore_terminal(self._tty_modes, screen=self._screen_on)  # then the message
            self._write_error(f"specmon: {signal.Signals(signum).name} again: exiting now\n")
            self._force_exit(code)
            return
        self.signum = signum
        self.requested.set()
        self._arm_watchdog()
        for hook in self._hooks:
            threading.Thread(
                target=_quietly, args=(hook,), name="specmon-stop-hook", daemon=True
            ).start()
        callback = self._callback
        if callback is not None:
            callback()
            return
        raise KeyboardInterrupt

    def _arm_watchdog(self) -> None:
        started = time.monotonic()

        def watch() -> None:
            if self._done.wait(self.grace_s):
                return
            waited = time.monotonic() - started
            restore_terminal(self._tty_modes, screen=self._screen_on)  # then the message
            self._write_error(
                f"specmon: the clean stop did not finish within {waited:.1f} s: exiting now\n"
            )
            code = self.exit_code
            self._force_exit(code if code is not None else 1)

        self._watchdog = threading.Thread(target=watch, name="specmon-shutdown", daemon=True)
        self._watchdog.start()


def _quietly(hook: Callable[[], None]) -> None:
    """A stop hook's errors must not reach the screen the clean stop is restoring."""
    try:
        hook()
    except Exception:
        return


def _write_stderr(text: str) -> None:
    # os.write, not print: sys.stderr's buffer lock may be held by the interrupted main thread.
    try:
        os.write(sys.stderr.fileno(), text.encode("utf-8", "replace"))
    except (OSError, ValueError, AttributeError):
        return


_current: Shutdown | None = None


def install(grace_s: float = DEFAULT_GRACE_S) -> Shutdown:
    """Create the process's Shutdown, install its handlers and return it."""
    global _current
    _current = Shutdown(grace_s=grace_s)
    _current.install()
    return _current


def current() -> Shutdown | None:
    """The installed Shutdown (None when `install` was not called, e.g. in library use)."""
    return _current
