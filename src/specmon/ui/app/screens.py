"""The chat screen and its settings dialog."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Button, Footer, Input, Label, Static
from textual.worker import Worker, WorkerState

from specmon.ui.app.conversation import ChatSettings, Conversation, Turn, parse_settings
from specmon.ui.app.session_port import AnswerFeed, AnswerNumbers, Ask, Connection, SessionPort
from specmon.ui.app.widgets import HeaderBar, PromptInput, TurnView, format_numbers, literal

if TYPE_CHECKING:
    from specmon.ui.app.app import SpecmonApp

MIN_WIDTH = 60
MIN_HEIGHT = 15
TEXT_HZ = 20.0
"""Text frame rate: answers are drained and redrawn this often, never per token."""
NUMBERS_EVERY = 5
"""Numbers under a running answer are refreshed every this many text frames (4 Hz)."""
SETTLE_FRAMES = 60
"""After an answer ends its numbers keep being refreshed for this many text frames (3 s): the
/metrics acceptance and the vanilla-speed verdict arrive after the stream."""

_CONTEXT_ERROR = re.compile(
    r"HTTP 400.*(context|max_model_len|maximum model length|too long)", re.IGNORECASE
)


def _blank(value: float | int | None) -> str:
    return "" if value is None else str(value)


class SettingsScreen(ModalScreen[ChatSettings | None]):
    """Temperature, top-p and max tokens; blank means the server's default."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "cancel")]

    def __init__(self, settings: ChatSettings) -> None:
        super().__init__()
        self.settings = settings

    def compose(self) -> ComposeResult:
        s = self.settings
        with Vertical(id="settings-box"):
            yield Label("Sampling (blank = server default)")
            yield Label("temperature")
            yield Input(_blank(s.temperature), id="temperature")
            yield Label("top-p")
            yield Input(_blank(s.top_p), id="top-p")
            yield Label("max tokens")
            yield Input(_blank(s.max_tokens), id="max-tokens")
            yield Static("", id="settings-error", markup=False)
            with Horizontal(id="settings-buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#save")
    @on(Input.Submitted)
    def _save(self) -> None:
        result = parse_settings(
            self.query_one("#temperature", Input).value,
            self.query_one("#top-p", Input).value,
            self.query_one("#max-tokens", Input).value,
        )
        if isinstance(result, str):
            self.query_one("#settings-error", Static).update(Text(result))
            return
        self.dismiss(result)


class ChatScreen(Screen[None]):
    """The conversation: header, turns, prompt; connects on mount, streams at TEXT_HZ."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel answer"),
        Binding("f2", "settings", "settings"),
        Binding("f3", "why", "why flagged"),
        Binding("ctrl+r", "retry", "retry connect"),
        Binding("pageup", "scroll_up", "scroll up", show=False),
        Binding("pagedown", "scroll_down", "scroll down", show=False),
        Binding("ctrl+end", "follow", "follow", show=False),
        Binding("ctrl+q", "app.quit", "quit"),
    ]

    def __init__(self, port: SessionPort, settings: ChatSettings, system: str | None) -> None:
        super().__init__()
        self.port = port
        self.settings = settings
        self.conversation = Conversation(system=system)
        self.connection: Connection | None = None
        self.feed: AnswerFeed | None = None
        self.turn: Turn | None = None
        self.view: TurnView | None = None
        self._pending: tuple[str, int] | None = None
        self._timer: Timer | None = None
        self._frames = 0
        self._settling: tuple[AnswerFeed, TurnView, int] | None = None
        """The last finished answer, whose numbers still change (the settle scrape, the view's
        next publish): refreshed at the numbers rate for SETTLE_FRAMES text frames."""
        self.last_numbers: AnswerNumbers | None = None

    @property
    def specmon_app(self) -> SpecmonApp:
        from specmon.ui.app.app import SpecmonApp

        assert isinstance(self.app, SpecmonApp)
        return self.app

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        with Horizontal(id="connect-box"):
            yield Static("connecting…", id="connect-status", markup=False)
            yield Button("Retry", id="retry")
        yield VerticalScroll(id="conversation")
        yield PromptInput(placeholder="Ask something (Enter sends, ↑/↓ history)", id="prompt")
        yield Footer()
        yield Static("", id="too-small", markup=False)

    def on_mount(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()
        self.query_one("#retry", Button).display = False
        self._timer = self.set_interval(1 / TEXT_HZ, self._frame, pause=True)
        self.query_one("#prompt", PromptInput).focus()
        self.connect()

    # ------------------------------------------------------------ connection

    def connect(self) -> None:
        self.query_one("#connect-box").display = True
        self.query_one("#retry", Button).display = False
        self.query_one("#connect-status", Static).update("connecting…")
        self.query_one(HeaderBar).show(None, state="connecting…")
        self.run_worker(self.port.connect, thread=True, group="connect", exclusive=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "connect":
            return
        if event.state == WorkerState.SUCCESS:
            result = event.worker.result
            assert isinstance(result, Connection)
            self._connected(result)
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            self._connected(Connection(None, f"{type(error).__name__}: {error}"))

    def _connected(self, connection: Connection) -> None:
        self.connection = connection
        header = self.query_one(HeaderBar)
        status = self.query_one("#connect-status", Static)
        if connection.server is None:
            message = connection.error or "cannot connect"
            if connection.unauthorized:
                message = "401 Unauthorized: the server refused the API key. " + message
            status.update(literal(message + "  (Retry: ctrl+r)"))
            self.query_one("#retry", Button).display = True
            header.show(None, state="not connected")
            return
        self.query_one("#connect-box").display = False
        header.show(connection.server)
        self._update_too_small()

    def action_retry(self) -> None:
        if self.feed is None and not self.port.connected:
            self.connect()

    @on(Button.Pressed, "#retry")
    def _retry_pressed(self) -> None:
        self.action_retry()

    # ------------------------------------------------------------ sending

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        if not self.port.connected:
            self.specmon_app.notify("not connected to a server (ctrl+r retries)", markup=False)
            return
        if self.feed is not None:
            self.specmon_app.notify("an answer is still streaming (Esc cancels it)", markup=False)
            return
        prompt_input = self.query_one("#prompt", PromptInput)
        prompt_input.remember(prompt)
        prompt_input.value = ""
        self.send(prompt)

    def send(self, prompt: str, *, extra_drop: int = 0, view: TurnView | None = None) -> None:
        """Plan the context, show the turn and start streaming its answer."""
        server = self.port.server
        plan = self.conversation.plan(
            prompt,
            max_model_len=server.max_model_len if server else None,
            max_tokens=self.settings.max_tokens,
            extra_drop=extra_drop,
        )
        conversation_view = self.query_one("#conversation", VerticalScroll)
        if plan.error is not None:
            self._notice(plan.error, failed=True)
            return
        self.conversation.apply_drops(plan)
        for i in plan.drop:
            views = list(conversation_view.query(TurnView))
            if i < len(views):
                views[i].mark_dropped()
        if plan.notice:
            self._notice(plan.notice)
        request = Ask(
            prompt=prompt,
            system=self.conversation.system,
            max_tokens=plan.max_tokens,
            temperature=self.settings.temperature,
            top_p=self.settings.top_p,
            messages=plan.messages,
        )
        if view is None:
            turn = Turn(prompt)
            self.conversation.turns.append(turn)
            view = TurnView(prompt)
            conversation_view.mount(view)
        else:
            turn = self.conversation.turns[-1]
            turn.status = "streaming"
        self.turn, self.view = turn, view
        self._settling = None
        self._pending = (prompt, extra_drop)
        self.feed = self.port.ask(request)
        turn.request_id = self.feed.request_id
        self._frames = 0
        if self._timer is not None:
            self._timer.resume()

    def _notice(self, text: str, *, failed: bool = False) -> None:
        note = Static(literal(text), classes="notice")
        note.set_class(failed, "-failed")
        self.query_one("#conversation", VerticalScroll).mount(note)

    # ------------------------------------------------------------ streaming

    def _frame(self) -> None:
        """One text frame: drain what arrived, redraw the tail; finish when the answer ended."""
        feed, view, turn = self.feed, self.view, self.turn
        if feed is None or view is None or turn is None:
            self._settle_frame()
            return
        drained = feed.drain()
        answer = view.answer
        if drained.text:
            answer.append(drained.text)
        self._frames += 1
        if drained.ended is None:
            if self._frames % NUMBERS_EVERY == 0:
                answer.set_status(format_numbers(self.port.numbers(feed)))
            self.specmon_app.frame_drawn(drained.arrivals)
            return
        ended = drained.ended
        turn.answer = answer.text
        numbers = self.port.numbers(feed)
        if numbers.tokens is None:
            numbers = feed.numbers()
        turn.completion_tokens = numbers.tokens
        self.feed = None
        self._frames = 0
        if ended.outcome == "ok":
            turn.status = "ok"
            answer.finish(format_numbers(numbers))
            self._settling = (feed, view, SETTLE_FRAMES)
            self.last_numbers = numbers
        elif ended.outcome == "cancelled":
            turn.status = "cancelled"
            answer.finish(f"⏹ cancelled — partial answer kept · {format_numbers(numbers)}")
        else:
            error = ended.error or "the request failed"
            pending = self._pending
            if (
                not turn.answer
                and pending is not None
                and _CONTEXT_ERROR.search(error)
                and any(t.in_context for t in self.conversation.turns[:-1])
            ):
                # The server still found the context too long: drop one more turn and resend.
                self.send(pending[0], extra_drop=pending[1] + 1, view=view)
                return
            turn.status = "failed"
            turn.error = error
            hint = ""
            if "HTTP 401" in error:
                hint = "401 Unauthorized: the server refused the API key. "
            answer.finish(
                f"✗ failed — {hint}{error}" + (" · partial answer kept" if turn.answer else ""),
                failed=True,
            )
        self.specmon_app.frame_drawn(drained.arrivals, ended=True)

    def _settle_frame(self) -> None:
        settling = self._settling
        if settling is None:
            if self._timer is not None:
                self._timer.pause()
            return
        feed, view, left = settling
        if left % NUMBERS_EVERY == 0:
            numbers = self.port.numbers(feed)
            if numbers.tokens is not None:
                view.answer.set_status(format_numbers(numbers))
                self.last_numbers = numbers
        self._settling = (feed, view, left - 1) if left > 1 else None

    def action_why(self) -> None:
        """Say why the last answer was flagged (or that it was not)."""
        n = self.last_numbers
        if n is None:
            message = "no finished answer yet"
        elif n.flag == "vanilla":
            message = "VANILLA SPEED: " + "; ".join(n.reasons)
        elif n.flag == "ok":
            message = "not flagged: the last answer was not at vanilla speed"
        else:
            message = "not judged: no verdict on the last answer yet"
        self._notice("why: " + message)

    def action_cancel(self) -> None:
        if self.feed is not None:
            self.feed.cancel()

    # ------------------------------------------------------------ settings and scrolling

    def action_settings(self) -> None:
        def apply(result: ChatSettings | None) -> None:
            if result is not None:
                self.settings = result
                self.specmon_app.settings = result
                self._notice(
                    "settings: temperature "
                    f"{_blank(result.temperature) or 'default'}, top-p "
                    f"{_blank(result.top_p) or 'default'}, max tokens "
                    f"{_blank(result.max_tokens) or 'default'}"
                )

        self.specmon_app.push_screen(SettingsScreen(self.settings), apply)

    def action_scroll_up(self) -> None:
        self.query_one("#conversation", VerticalScroll).scroll_page_up(animate=False)

    def action_scroll_down(self) -> None:
        self.query_one("#conversation", VerticalScroll).scroll_page_down(animate=False)

    def action_follow(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()

    # ------------------------------------------------------------ size

    def on_resize(self, event: Resize) -> None:
        self._update_too_small()

    def _update_too_small(self) -> None:
        width, height = self.size
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        self.set_class(small, "-too-small")
        if small:
            server = self.connection.server if self.connection else None
            badge = "SIMULATED server. " if server is not None and server.simulated else ""
            self.query_one("#too-small", Static).update(
                Text(
                    f"{badge}Terminal too small ({width}x{height}): enlarge it to at least "
                    f"{MIN_WIDTH}x{MIN_HEIGHT}."
                )
            )
