"""SpecmonApp: the Textual app of `specmon chat`."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from specmon.ui.app.conversation import ChatSettings
from specmon.ui.app.screens import ChatScreen
from specmon.ui.app.session_port import SessionPort

FrameHook = Callable[[tuple[float, ...], bool], None]


class SpecmonApp(App[None]):
    """The chat app. `port` talks to the runtime; `frame_hook` (benchmarks, tests) is told the
    arrival times of the text drawn in each frame, after the frame is on screen."""

    CSS_PATH = "app.tcss"
    TITLE = "specmon"
    ENABLE_COMMAND_PALETTE = False

    def __init__(
        self,
        port: SessionPort,
        *,
        settings: ChatSettings | None = None,
        system: str | None = None,
        frame_hook: FrameHook | None = None,
    ) -> None:
        super().__init__()
        self.port = port
        self.settings = settings or ChatSettings()
        self.system = system
        self.frame_hook = frame_hook

    def on_mount(self) -> None:
        self.push_screen(ChatScreen(self.port, self.settings, self.system))

    def frame_drawn(self, arrivals: tuple[float, ...], ended: bool = False) -> None:
        """Called by the chat after each text frame; passes arrivals on once it is painted."""
        hook = self.frame_hook
        if hook is not None and (arrivals or ended):
            self.call_after_refresh(hook, arrivals, ended)
