"""SpecmonApp: the Textual app of `specmon chat`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider

from specmon.ui.app.conversation import ChatSettings
from specmon.ui.app.help_screen import HelpScreen
from specmon.ui.app.palette import ActionsProvider, binding_commands
from specmon.ui.app.screens import ChatScreen
from specmon.ui.app.session_port import ReplayPort, SessionPort
from specmon.ui.app.watch_screen import DashboardScreen
from specmon.ui.app.worth_screen import WorthScreen
from specmon.ui.themes import load_themes, resolve_theme

if TYPE_CHECKING:
    from specmon.ui.app.startup_view import HostWatch, StartupFailed
    from specmon.ui.chat_history import ChatHistory

FrameHook = Callable[[tuple[float, ...], bool], None]
Mode = Literal["chat", "demo", "watch", "replay"]


class SpecmonApp(App[None]):
    """The app of `specmon chat` (mode "chat"), `specmon demo` (the chat against the built-in
    simulator, sending `auto_prompts` one after another, SIMULATED from the first frame) and
    `specmon watch` (the dashboard screen, no chat); with a ReplayPort, `specmon replay` (mode
    "replay": a recording played back, ui/app/replay_screen.py). `port` talks to the runtime;
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
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
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
        self.chat_history = chat_history  # saved conversations (None: not saved, not resumed)
        self.host_failure: StartupFailed | None = None
        """Why the hosted server did not start or stopped (the command then exits 1)."""

    def on_unmount(self) -> None:
        # Textual's exit waits for its worker threads; a connection still being made (the
        # collector importing, a slow server) would hold the exit until it is made.
        threading.Thread(target=self.port.abort, name="specmon-abort", daemon=True).start()

    def on_mount(self) -> None:
        self.call_after_refresh(self._theme_notices)  # on the first screen, once it is shown
        if isinstance(self.port, ReplayPort):
            from specmon.ui.app.replay_screen import ReplayScreen

            self.push_screen(ReplayScreen(self.port))
            return
        if self.host is not None:
            from specmon.ui.app.startup_view import StartupScreen

            self.push_screen(StartupScreen(self.host))
            return
        self._push_main()

    def host_ready(self) -> None:
        """The hosted server answered /health 200: its chat or dashboard replaces the startup
        view, and the server is watched from then on."""
        self._push_main(replace=True)
        self.set_interval(1.0, self._watch_host)

    def host_failed(self, failure: StartupFailed) -> None:
        self.host_failure = failure
        if self.host is not None and self.host.exit_on_failure:
            self.exit()

    def _watch_host(self) -> None:
        if self.host is None or self.host_failure is not None:
            return
        failure = self.host.exit_failure()
        if failure is not None:
            from specmon.ui.app.startup_view import StartupScreen

            if not self.host.exit_on_failure:
                self.push_screen(StartupScreen(self.host, failure=failure))
            self.host_failed(failure)

    def action_toggle_log(self) -> None:
        from specmon.ui.app.log_pane import LogScreen
        from specmon.ui.app.startup_view import StartupScreen

        if self.host is None:
            self.notify("no log: specmon did not start this server", timeout=3)
        elif isinstance(self.screen, LogScreen):
            self.screen.dismiss(None)
        elif not isinstance(self.screen, StartupScreen):  # the startup view shows it already
            self.push_screen(LogScreen(self.host))

    def _push_main(self, *, replace: bool = False) -> None:
        push = self.switch_screen if replace else self.push_screen
        assert isinstance(self.port, SessionPort)  # a ReplayPort has its own screen
        if self.mode == "watch":
            push(DashboardScreen(self.port))
            return
        push(
            ChatScreen(
                self.port,
                self.settings,
                self.system,
                auto_prompts=self.auto_prompts,
                command=self.mode,
            )
        )

    def _theme_notices(self) -> None:
        for message in self.theme_messages:
            self.notify(message, title="theme", severity="warning", timeout=15, markup=False)

    def action_help(self) -> None:
        """The help screen: the keys of the current screen and what every number means (F1 or
        ? again, or Esc, closes it)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(binding_commands(self.screen, self)))

    def action_worth(self) -> None:
        """What each draft position is worth, for the first server (a modal; w, F8 or Esc
        closes it)."""
        if isinstance(self.screen, WorthScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(WorthScreen(self.port.view))

    def frame_drawn(self, arrivals: tuple[float, ...], ended: bool = False) -> None:
        """Called by the chat after each text frame; passes arrivals on once it is painted."""
        hook = self.frame_hook
        if hook is not None and (arrivals or ended):
            self.call_after_refresh(hook, arrivals, ended)
