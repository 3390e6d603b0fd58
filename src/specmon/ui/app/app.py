"""SpecmonApp: the Textual app of `specmon chat`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from textual.app import App
from textual.binding import Binding, BindingType

from specmon.ui.app.conversation import ChatSettings
from specmon.ui.app.screens import ChatScreen
from specmon.ui.app.session_port import SessionPort
from specmon.ui.app.watch_screen import DashboardScreen

FrameHook = Callable[[tuple[float, ...], bool], None]
Mode = Literal["chat", "demo", "watch"]


class SpecmonApp(App[None]):
    """The app of `specmon chat` (mode "chat"), `specmon demo` (the chat against the built-in
    simulator, sending `auto_prompts` one after another, SIMULATED from the first frame) and
    `specmon watch` (the dashboard screen, no chat). `port` talks to the runtime; `frame_hook`
    (benchmarks, tests) is told the arrival times of the text drawn in each frame, after the
    frame is on screen; `clock` paces the demo's prompts (injectable for tests)."""

    CSS_PATH = "app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]
    TITLE = "specmon"
    ENABLE_COMMAND_PALETTE = False

    def __init__(
        self,
        port: SessionPort,
        *,
        settings: ChatSettings | None = None,
        system: str | None = None,
        frame_hook: FrameHook | None = None,
        mode: Mode = "chat",
        auto_prompts: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        max_answers: int | None = None,
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

    def on_unmount(self) -> None:
        # Textual's exit waits for its worker threads; a connection still being made (the
        # collector importing, a slow server) would hold the exit until it is made.
        threading.Thread(target=self.port.abort, name="specmon-abort", daemon=True).start()

    def on_mount(self) -> None:
        if self.mode == "watch":
            self.push_screen(DashboardScreen(self.port))
            return
        self.push_screen(
            ChatScreen(
                self.port,
                self.settings,
                self.system,
                auto_prompts=self.auto_prompts,
                command=self.mode,
            )
        )

    def frame_drawn(self, arrivals: tuple[float, ...], ended: bool = False) -> None:
        """Called by the chat after each text frame; passes arrivals on once it is painted."""
        hook = self.frame_hook
        if hook is not None and (arrivals or ended):
            self.call_after_refresh(hook, arrivals, ended)
