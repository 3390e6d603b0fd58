"""SpecmonApp: the one Textual app of specmon (docs/app.md): `chat`, `demo`, `watch`, `serve`
(the dashboard of the server it hosts) and `replay`. It starts on the screen `first_screen`
picks (replay, host mode's start-up view, or the chat / dashboard) and handles the messages its
screens post (ui/messages.py); it reaches the session only through its port (ui/port.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.screen import Screen

from specmon.ui.conversation import ChatSettings
from specmon.ui.host import HostWatch, LogSource, StartupFailed
from specmon.ui.messages import HostFailed, HostReady, SettingsChanged
from specmon.ui.palette import ActionsProvider, binding_commands
from specmon.ui.port import SessionPort
from specmon.ui.replay_port import ReplayPort
from specmon.ui.screens.chat import ChatScreen, FrameHook
from specmon.ui.screens.help import HelpScreen
from specmon.ui.screens.log import LogScreen
from specmon.ui.screens.replay import ReplayScreen
from specmon.ui.screens.startup import StartupScreen
from specmon.ui.screens.watch import DashboardScreen
from specmon.ui.screens.worth import WorthScreen
from specmon.ui.themes import load_themes, resolve_theme

if TYPE_CHECKING:
    from rich.console import RenderableType

    from specmon.ui.chat_history import ChatHistory

Mode = Literal["chat", "demo", "watch", "replay"]

INTERRUPTED = 130
"""The app's return code after Ctrl-C (the shell's exit status after SIGINT): the command then
stops as after SIGINT. ctrl+q and q quit with 0."""


class SpecmonApp(App[None]):
    """The app of `specmon chat` (mode "chat"), `specmon demo` (the chat against the built-in
    simulator, sending `auto_prompts` one after another, SIMULATED from the first frame) and
    `specmon watch` and `specmon serve` (the dashboard screen, no chat); with a ReplayPort,
    `specmon replay` (mode "replay": a recording played back, ui/screens/replay.py). `port` is
    the app's one door to the session (a LivePort over the runtime, or the ReplayPort);
    `frame_hook` (benchmarks, tests) is told the arrival times of the text drawn in each frame,
    after the frame is on screen; `clock` paces the demo's prompts (injectable for tests).

    `theme`: a theme name or theme file (`--theme`); one that cannot be used gives the default
    theme and a one-line notice naming the file and line. None keeps Textual's own default (the
    tests' snapshots); the commands pass specmon-dark by default. specmon's themes (shipped and
    the user's) are registered either way, so the palette can switch to them. App-wide keys:
    F1 or ? the help screen, F8 or w what each draft position is worth, ctrl+p the command
    palette (every action of the screen, and the themes)."""

    CSS_PATH = "app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "quit", show=False, priority=True),
        Binding("f1", "help", "help"),
        Binding("question_mark", "help", "help", show=False),
        Binding("f8", "worth", "worth"),
        Binding("w", "worth", "worth", show=False),
        Binding("ctrl+l", "toggle_log", "vLLM log", show=False),
        Binding("l", "toggle_log", "vLLM log", show=False),
    ]
    TITLE = "specmon"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ActionsProvider}

    def __init__(
        self,
        port: SessionPort | ReplayPort,
        *,
        settings: ChatSettings | None = None,
        system: str | None = None,
        frame_hook: FrameHook | None = None,
        mode: Mode = "chat",
        auto_prompts: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        max_answers: int | None = None,
        theme: str | None = None,
        host: HostWatch | None = None,
        server_log: LogSource | None = None,
        chat_history: ChatHistory | None = None,
    ) -> None:
        super().__init__()
        self.port = port
        self.settings = settings or ChatSettings()
        self.system = system
        self.frame_hook = frame_hook
        self.mode: Mode = mode
        self.auto_prompts = tuple(auto_prompts)
        self.clock = clock
        self.max_answers = max_answers
        """The demo's `--requests N`: quit once N answers have finished (None: never)."""
        self.theme_messages: tuple[str, ...] = ()
        """Why the requested theme could not be used (one line each; shown on start)."""
        loaded = load_themes()
        for t in loaded.themes.values():
            self.register_theme(t)
        if theme is not None:
            choice = resolve_theme(theme, loaded)
            self.register_theme(choice.theme)
            self.theme = choice.theme.name
            self.theme_messages = choice.messages
        self.host = host
        """Host mode: the vLLM server specmon started (startup view first, then the chat or
        the dashboard; its log toggled with l / ctrl+l)."""
        self.server_log = server_log
        """The log of a server specmon runs in process (the demo's simulator), shown with l /
        ctrl+l as a hosted server's is."""
        self.chat_history = chat_history  # saved conversations (None: not saved, not resumed)
        self.exiting = False
        """The app was asked to exit (a key, a stop signal): no new screen from then on."""
        self.host_failure: StartupFailed | None = None
        """Why the hosted server did not start or stopped (the command then exits 1)."""

    def exit(
        self, result: None = None, return_code: int = 0, message: RenderableType | None = None
    ) -> None:
        """Textual's exit, remembered (`exiting`)."""
        self.exiting = True
        super().exit(result, return_code, message)

    def action_interrupt(self) -> None:
        """Ctrl-C: quit, as interrupted (return code INTERRUPTED: the command exits 130)."""
        self.exit(return_code=INTERRUPTED)

    def on_unmount(self) -> None:
        # Textual's exit waits for its worker threads; a connection still being made (the
        # collector importing, a slow server) would hold the exit until it is made.
        threading.Thread(target=self.port.abort, name="specmon-abort", daemon=True).start()

    def on_mount(self) -> None:
        self.call_after_refresh(self._theme_notices)  # on the first screen, once it is shown
        self.push_screen(self.first_screen())

    def first_screen(self) -> Screen[None]:
        """The screen the app starts on: the replay screen for a ReplayPort, the startup view in
        host mode, else the main screen of the mode."""
        if isinstance(self.port, ReplayPort):
            return ReplayScreen(self.port)
        if self.host is not None:
            return StartupScreen(self.host)
        return self.main_screen()

    def main_screen(self) -> Screen[None]:
        """The chat (chat, demo) or the dashboard (watch), built from the app's settings."""
        port = self.port
        assert not isinstance(port, ReplayPort)  # a ReplayPort has its own screen
        if self.mode == "watch":
            return DashboardScreen(port)
        return ChatScreen(
            port,
            self.settings,
            self.system,
            auto_prompts=self.auto_prompts,
            command=self.mode,
            clock=self.clock,
            frame_hook=self.frame_hook,
            max_answers=self.max_answers,
            chat_history=self.chat_history,
        )

    def on_host_ready(self, _message: HostReady) -> None:
        """The hosted server answered /health 200: its chat or dashboard replaces the startup
        view, and the server is watched from then on (not once the app is exiting: a screen
        mounted during the exit would query widgets the exit has already taken down)."""
        if self.exiting:
            return
        self.switch_screen(self.main_screen())
        self.set_interval(1.0, self._watch_host)

    def on_host_failed(self, message: HostFailed) -> None:
        self.host_failed(message.failure)

    def on_settings_changed(self, message: SettingsChanged) -> None:
        self.settings = message.settings

    def host_failed(self, failure: StartupFailed) -> None:
        self.host_failure = failure
        if self.host is not None and self.host.exit_on_failure:
            self.exit()

    def _watch_host(self) -> None:
        if self.host is None or self.host_failure is not None:
            return
        failure = self.host.exit_failure()
        if failure is not None:
            if not self.host.exit_on_failure:
                self.push_screen(StartupScreen(self.host, failure=failure))
            self.host_failed(failure)

    def action_toggle_log(self) -> None:
        """l / ctrl+l: the log of the server specmon started (a hosted vLLM, the demo's
        simulator) over the screen, and back."""
        if isinstance(self.screen, LogScreen):
            self.screen.dismiss(None)
        elif self.host is not None:
            if not isinstance(self.screen, StartupScreen):  # the startup view shows it already
                self.push_screen(LogScreen(self.host))
        elif self.server_log is not None:
            self.push_screen(LogScreen(self.server_log, title="simulator log"))
        else:
            self.notify("no log: specmon did not start this server", timeout=3)

    def _theme_notices(self) -> None:
        for message in self.theme_messages:
            self.notify(message, title="theme", severity="warning", timeout=15, markup=False)

    def action_help(self) -> None:
        """The help screen: the keys of the current screen and what every number means (F1 or
        ? again, or Esc, closes it)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        prompt = bool(self.screen.query("#prompt"))
        self.push_screen(HelpScreen(binding_commands(self.screen, self), prompt=prompt))

    def action_worth(self) -> None:
        """What each draft position is worth, for the first server (a modal; w, F8 or Esc
        closes it)."""
        if isinstance(self.screen, WorthScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(WorthScreen(self.port.view))
