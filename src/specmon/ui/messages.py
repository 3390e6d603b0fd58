"""Every message a screen sends to the app, in one module: screens and widgets never import the
app; they post these and the app handles them (`SpecmonApp.on_host_ready`, ...)."""

from __future__ import annotations

from textual.message import Message

from specmon.ui.conversation import ChatSettings
from specmon.ui.host import StartupFailed


class HostReady(Message):
    """Host mode: the hosted server answered /health 200; the app replaces the startup view by
    its chat or dashboard and watches the server from then on."""


class HostFailed(Message):
    """Host mode: the hosted server did not start, or stopped (the command then exits 1)."""

    def __init__(self, failure: StartupFailed) -> None:
        super().__init__()
        self.failure = failure


class SettingsChanged(Message):
    """The chat's sampling settings were saved in the settings dialog (the app keeps them for the
    next chat screen it builds)."""

    def __init__(self, settings: ChatSettings) -> None:
        super().__init__()
        self.settings = settings
