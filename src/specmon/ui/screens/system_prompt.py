"""The conversation's system prompt, edited in a dialog (the chat screen's ctrl+o): several lines,
ctrl+s or Save keeps it (blank: no system prompt), Esc or Cancel leaves it as it was. The next
request sends it; it is saved with the conversation."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, TextArea

MAX_SYSTEM_CHARS = 100_000
"""A longer system prompt is refused in the dialog (one line says so)."""


class SystemPromptScreen(ModalScreen[str | None]):
    """Dismissed with the new system prompt ("" = none) or None (cancelled)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "keep", "save"),
    ]
    DEFAULT_CSS = """
    SystemPromptScreen { align: center middle; }
    SystemPromptScreen #system-box {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: round $primary; padding: 0 1; background: $surface;
    }
    SystemPromptScreen #system-text { height: 10; }
    SystemPromptScreen #system-error { color: $error; height: auto; }
    SystemPromptScreen #system-buttons { height: auto; }
    """

    def __init__(self, system: str | None) -> None:
        super().__init__()
        self.system = system or ""

    def compose(self) -> ComposeResult:
        with Vertical(id="system-box"):
            yield Label("System prompt of this conversation (ctrl+s saves, Esc cancels)")
            yield TextArea(self.system, id="system-text", soft_wrap=True)
            yield Label("", id="system-error", markup=False)
            with Horizontal(id="system-buttons"):
                yield Button("Save", variant="primary", id="system-save")
                yield Button("Cancel", id="system-cancel")

    def on_mount(self) -> None:
        self.query_one("#system-text", TextArea).focus()

    @on(Button.Pressed, "#system-save")
    def action_keep(self) -> None:
        text = self.query_one("#system-text", TextArea).text
        if len(text) > MAX_SYSTEM_CHARS:
            self.query_one("#system-error", Label).update(
                f"too long: {len(text)} characters (at most {MAX_SYSTEM_CHARS})"
            )
            return
        self.dismiss(text.strip())

    @on(Button.Pressed, "#system-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
