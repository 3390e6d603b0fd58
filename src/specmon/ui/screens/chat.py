"""The chat screen (with the dashboard's side panel) and the dialogs it shares with the dashboard
screen of `specmon watch` (ui/screens/watch.py): settings, marker label, the table of all
answers."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.timer import Timer
from textual.widgets import Footer, Input, Static
from textual.worker import Worker

from specmon.core.context_overflow import CONTEXT_OVERFLOW
from specmon.core.step_heat import AnswerHeat, answer_heat, pieces_from_chunks
from specmon.core.views import SessionView
from specmon.ui.answer_feed import AnswerFeed
from specmon.ui.answer_numbers import AnswerNumbers, find_row
from specmon.ui.chat_actions import answer_to_copy, copied_line, keep_copy
from specmon.ui.chat_history import ChatHistory, ChatState
from specmon.ui.conversation import ChatSettings, Conversation, Turn
from specmon.ui.formatting import shorten, visible_line
from specmon.ui.messages import SettingsChanged
from specmon.ui.port import Ask, Connection, SessionPort
from specmon.ui.screens.dialogs import AnswersScreen, ModelScreen, SettingsScreen, blank
from specmon.ui.screens.recording import RecordingScreen
from specmon.ui.styles import theme_styles
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.connect_box import ConnectBox
from specmon.ui.widgets.diagnosis_panel import answer_diagnosis, ttft_split_of
from specmon.ui.widgets.heat import heat_colors, heat_legend, heat_styles
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.side_panel import SidePanel, panel_summary, toggle_open
from specmon.ui.widgets.turn import (
    HeaderBar,
    PromptInput,
    StatusLine,
    TurnView,
    format_numbers,
    literal,
)

FrameHook = Callable[[tuple[float, ...], bool], None]
"""Told the arrival times of the text drawn in a frame, and whether the answer ended."""

MIN_WIDTH = 60
MIN_HEIGHT = 15
TEXT_HZ = 20.0
"""Text frame rate: answers are drained and redrawn this often, never per token."""
NUMBERS_EVERY = 5
"""Numbers under a running answer are refreshed every this many text frames (4 Hz)."""
PANEL_HZ = 4.0
"""The side panel's numbers are redrawn this often."""
NARROW_WIDTH = 110
"""Below this many columns the side panel is stacked under the chat."""
TALL_HEIGHT = 36
"""Below this many rows a narrow terminal shows the panel as one summary line (F9 opens it)."""
NOTICE_CELLS = 80
"""Cells of the system prompt's first line quoted in the notice that it was set (cut with …)."""
AUTO_PROMPT_GAP_S = 1.0
"""In the demo, the pause between an answer's end and the next demo prompt."""
SETTLE_FRAMES = 60
"""After an answer ends its numbers keep being refreshed for this many text frames (3 s): the
/metrics acceptance and the vanilla-speed verdict arrive after the stream."""

_CONTEXT_ERROR = CONTEXT_OVERFLOW  # the runtime resends first; this is the fallback


class ChatScreen(RecordingScreen):
    """The conversation and the side panel: header, turns, prompt, dashboard; connects on mount,
    streams at TEXT_HZ, redraws the panel at PANEL_HZ. With `auto_prompts` (the demo) it sends
    them one after another; prompts the user types meanwhile go next.

    Layouts (breakpoint classes, app.tcss): at NARROW_WIDTH columns or more the panel is beside
    the chat; below, under it (-narrow); below TALL_HEIGHT rows as well (-narrow -short: 80x24)
    the panel is one summary line above the prompt, and F9 shows the whole panel instead of the
    conversation (-panel-open)."""

    # Textual declares these `ClassVar[...] | None`, which mypy reads as an instance variable.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-narrow"),
        (NARROW_WIDTH, "-wide"),
    ]
    VERTICAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-short"),
        (TALL_HEIGHT, "-tall"),
    ]

    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer shows them in this order and an 80-column one is cut: most needed first.
        Binding("f1", "app.help", "help"),  # first in the footer (also the app's, every screen)
        # Priority, so that it (not the app's hidden one) is the footer's: q types into the prompt.
        Binding("ctrl+q", "app.quit", "quit", priority=True),
        Binding("f9", "toggle_panel", "panel"),
        Binding("escape", "cancel", "cancel answer"),
        Binding("f2", "settings", "settings"),
        Binding("f3", "why", "why (badge)"),
        Binding("f4", "answers", "answers"),
        Binding("f5", "record", "record"),
        Binding("f6", "marker", "marker"),
        Binding("f7", "heat", "heat"),
        Binding("f8", "app.worth", "worth"),
        Binding("ctrl+s", "export_markdown", "export .md", show=False),
        Binding("ctrl+y", "copy_answer(False)", "copy answer", show=False),
        Binding("ctrl+b", "copy_answer(True)", "copy code block", show=False),
        Binding("ctrl+up", "edit_last", "edit last prompt", show=False),
        Binding("ctrl+o", "system_prompt", "system prompt", show=False),
        Binding("ctrl+t", "switch_model", "switch model", show=False),
        Binding("r", "record", "record", show=False),
        Binding("m", "marker", "marker", show=False),
        Binding("h", "heat", "heat", show=False),
        Binding("ctrl+r", "retry", "retry connect"),
        Binding("pageup", "scroll_up", "scroll up", show=False),
        Binding("pagedown", "scroll_down", "scroll down", show=False),
        Binding("ctrl+end", "follow", "follow", show=False),
    ]

    def __init__(
        self,
        port: SessionPort,
        settings: ChatSettings,
        system: str | None,
        *,
        auto_prompts: Sequence[str] = (),
        command: str = "chat",
        clock: Callable[[], float] = time.monotonic,
        frame_hook: FrameHook | None = None,
        max_answers: int | None = None,
        chat_history: ChatHistory | None = None,
    ) -> None:
        super().__init__()
        self.port = port
        self.chat_history = chat_history
        """Saved conversations: saves this one as it grows, restores a resumed one on mount
        (None: `--no-save` and no resume, or the demo)."""
        self.command = command
        self.clock = clock
        """Paces the demo's prompts (injectable for tests)."""
        self.frame_hook = frame_hook
        """Told the arrival times of the text drawn in each frame, once it is on screen
        (benchmarks, tests)."""
        self.max_answers = max_answers
        """The demo's `--requests N`: quit once N answers have finished (None: never)."""
        self.auto_prompts = tuple(auto_prompts)
        self._auto_index = 0
        self.queued: deque[str] = deque()
        """Prompts typed while an answer streamed (demo): they go next."""
        self._idle_since: float | None = None
        self.settings = settings
        self.conversation = Conversation(system=system)
        self.connection: Connection | None = None
        self.feed: AnswerFeed | None = None
        self.turn: Turn | None = None
        self.view: TurnView | None = None
        self._pending: tuple[str, int] | None = None
        self._overflow_named = False
        """Whether the streaming answer's overflow drops were named (runtime.prompt_loop)."""
        self._timer: Timer | None = None
        self._frames = 0
        self._settling: tuple[AnswerFeed, TurnView, int] | None = None
        """The last finished answer, whose numbers still change (the settle scrape, the view's
        next publish): refreshed at the numbers rate for SETTLE_FRAMES text frames."""
        self.last_numbers: AnswerNumbers | None = None
        self.heat_on = False
        """Answers coloured by engine step (the h / F7 key)."""
        self.answer_feeds: dict[AnswerView, AnswerFeed] = {}
        """Each answer's feed (its chunks and token counts, for the acceptance heat)."""

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header", command=self.command, simulated=self.command == "demo")
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield ConnectBox(self.port.connect, id="connect-box")
                yield VerticalScroll(id="conversation")
                yield Static("", id="heat-legend", markup=False)
                yield Static("", id="panel-summary", markup=False)
                yield PromptInput(
                    placeholder="Ask something (Enter sends, ↑/↓ history)", id="prompt"
                )
            yield SidePanel(id="side-panel")
        yield KeysFooter()
        yield Static("", id="too-small", markup=False)

    def on_mount(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()
        self.query_one("#heat-legend", Static).display = False
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        self._timer = self.set_interval(1 / TEXT_HZ, self._frame, pause=True)
        self.set_interval(1 / PANEL_HZ, self.refresh_panel)
        if self.auto_prompts:
            self.set_interval(0.25, self._auto_send)
        self.query_one("#prompt", PromptInput).focus()
        self.refresh_panel()
        self._restore_conversation()
        self.connect()

    # ------------------------------------------------------------ side panel

    def current_numbers(self) -> AnswerNumbers | None:
        """The numbers of the answer streaming now, else of the last finished one."""
        feed = self.feed
        if feed is not None:
            return self.port.numbers(feed)
        return self.last_numbers

    def refresh_panel(self) -> None:
        """Redraw the side panel's numbers from the published view (PANEL_HZ)."""
        view = self.port.view()
        numbers = self.current_numbers()
        self.query_one(SidePanel).show(view, numbers, waiting=self._waiting_word())
        summary = panel_summary(
            view,
            numbers,
            waiting=self._waiting_word(),
            styles=theme_styles(self.app.theme_variables),
        )
        self.query_one("#panel-summary", Static).update(summary)
        history = self.chat_history
        if history is not None and (notice := history.notice()) is not None:
            self._notice(notice[0], failed=notice[1])
        self._complete_header_k(view)

    def _complete_header_k(self, view: SessionView | None) -> None:
        """The header's K from /metrics once known, when the server did not announce one (a real
        vLLM tells an attached client no K: the header said "n_spec —" beside the panel's K)."""
        c = self.connection
        if c is None or c.server is None or c.server.n_spec is not None or view is None:
            return
        ks = {s.n_spec for s in view.servers}
        if len(ks) != 1:
            return
        (k,) = ks
        if k is None:
            return
        server = replace(c.server, n_spec=k)
        self.connection = replace(c, server=server)
        self.query_one(HeaderBar).show(server)

    def _waiting_word(self) -> str:
        c = self.connection
        return "not connected" if c is not None and c.server is None else "connecting…"

    def _say(self, text: str, *, failed: bool = False) -> None:
        self._notice(text, failed=failed)
        self.app.notify(text, markup=False, severity="error" if failed else "information")

    def action_answers(self) -> None:
        self.app.push_screen(AnswersScreen(self.port))

    # ------------------------------------------------------------ demo prompts

    def _auto_send(self) -> None:
        """Demo: when idle for AUTO_PROMPT_GAP_S, send the user's queued prompt, else the next
        demo prompt."""
        if not self.port.connected or self.feed is not None:
            self._idle_since = None
            return
        if self.queued:
            self.send(self.queued.popleft())
            return
        now = self.clock()
        first = self._auto_index == 0  # the first prompt goes out at once
        if self._idle_since is None and not first:
            self._idle_since = now
            return
        # (not `now - (now - gap) >= gap`: in floating point that is false for some clock
        # values and gaps, and the demo then never sent its first prompt)
        waited = first or (
            self._idle_since is not None and now - self._idle_since >= AUTO_PROMPT_GAP_S
        )
        if waited and self.auto_prompts:
            prompt = self.auto_prompts[self._auto_index % len(self.auto_prompts)]
            self._auto_index += 1
            self._idle_since = None
            self.send(prompt)

    # ------------------------------------------------------------ connection

    def connect(self) -> None:
        self.query_one(HeaderBar).show(None, state="connecting…")
        self.query_one(ConnectBox).start()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self._record_worker_done(event)

    @on(ConnectBox.Connected)
    def _connected(self, event: ConnectBox.Connected) -> None:
        connection = self.connection = event.connection
        header = self.query_one(HeaderBar)
        if connection.server is None:
            header.show(None, state="not connected")
            return
        header.show(connection.server)
        self._update_too_small()

    def action_retry(self) -> None:
        if self.port.connected:
            self.app.notify("already connected: nothing to retry", timeout=3)
        elif self.feed is None:
            self.connect()

    # ------------------------------------------------------------ sending

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        # The prompt field emptied itself on Enter (what was typed after Enter stays there for
        # the next prompt); a line that is not sent goes back into it.
        prompt_input = self.query_one("#prompt", PromptInput)
        prompt = event.value.strip()
        if not prompt:
            prompt_input.give_back(event.value)
            return
        if not self.port.connected:
            prompt_input.give_back(event.value)
            self.app.notify("not connected to a server (ctrl+r retries)", markup=False)
            return
        if self.feed is not None:
            if not self.auto_prompts:
                prompt_input.give_back(event.value)
                self.app.notify("an answer is still streaming (Esc cancels it)", markup=False)
                return
            self.queued.append(prompt)  # the demo: the user's prompt goes next
            prompt_input.remember(prompt)
            self._notice(f"queued, goes next: {prompt}")
            return
        prompt_input.remember(prompt)
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
        turn.system = self.conversation.system or ""  # the export shows where it took effect
        self.turn, self.view = turn, view
        self._settling = None
        self._pending = (prompt, extra_drop)
        self._overflow_named = False
        self.feed = self.port.ask(request)
        self.answer_feeds[view.answer] = self.feed
        turn.request_id = self.feed.request_id
        self._frames = 0
        if self._timer is not None:
            self._timer.resume()

    def _name_overflow_drops(self, n: int) -> None:
        """The answer was asked again without its `n` oldest turns (the server said the context
        was too long): mark them dropped and name them in one line. It stays one answer."""
        self._overflow_named = True
        dropped = self.conversation.drop_oldest(n)
        views = list(self.query_one("#conversation", VerticalScroll).query(TurnView))
        for i in dropped:
            if i < len(views):
                views[i].mark_dropped()
        self._notice(self.conversation.overflow_notice(dropped))

    def _notice(self, text: str, *, failed: bool = False) -> None:
        note = Static(literal(text), classes="notice")
        note.set_class(failed, "-failed")
        self.query_one("#conversation", VerticalScroll).mount(note)

    # ------------------------------------------------------------ streaming

    def _frame_drawn(self, arrivals: tuple[float, ...], ended: bool = False) -> None:
        """After each text frame: the frame hook gets the arrivals once they are painted."""
        hook = self.frame_hook
        if hook is not None and (arrivals or ended):
            self.app.call_after_refresh(hook, arrivals, ended)

    def _frame(self) -> None:
        """One text frame: drain what arrived, redraw the tail; finish when the answer ended."""
        feed, view, turn = self.feed, self.view, self.turn
        if feed is None or view is None or turn is None:
            self._settle_frame()
            return
        drained = feed.drain()
        if feed.dropped_turns and not self._overflow_named:
            self._name_overflow_drops(feed.dropped_turns)
        answer = view.answer
        if drained.text:
            answer.append(drained.text)
        self._frames += 1
        if drained.ended is None:
            if self._frames % NUMBERS_EVERY == 0:
                answer.numbers = self.port.numbers(feed)
                status = format_numbers(answer.numbers)
                quiet = self.port.quiet_note(feed)
                answer.set_status(f"{status} · ⏳ {quiet}" if quiet else status)
            self._frame_drawn(drained.arrivals)
            return
        ended = drained.ended
        turn.answer = answer.text
        numbers = self.port.numbers(feed)
        turn.completion_tokens = numbers.tokens
        answer.numbers = numbers
        self.feed = None
        self._frames = 0
        if ended.outcome == "ok":
            turn.status = "ok"
            answer.finish(format_numbers(numbers))
            self._settling = (feed, view, SETTLE_FRAMES)
            self.last_numbers = numbers
        elif ended.outcome == "cancelled":
            feed.release()  # only the shown text of a cancelled answer stays
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
            feed.release()  # only the shown text of a failed answer stays
            turn.status = "failed"
            turn.error = error
            hint = ""
            if "HTTP 401" in error:
                hint = "401 Unauthorized: the server refused the API key. "
            answer.finish(
                f"✗ failed — {hint}{error}" + (" · partial answer kept" if turn.answer else ""),
                failed=True,
            )
        if self.heat_on:
            self._paint_heat(answer)
        self.save_conversation()
        self._frame_drawn(drained.arrivals, ended=True)
        limit = self.max_answers
        finished = sum(t.status != "streaming" for t in self.conversation.turns)
        if limit is not None and finished >= limit:
            self.auto_prompts = ()  # no more demo prompts; quit once the last one is drawn
            self.set_timer(1.0, self.app.exit)

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
                view.answer.numbers = numbers
                # seconds saved or cost, a quality flag; TTFT once, with its split (when the
                # row has them)
                session = self.port.view()
                extra = answer_diagnosis(session, numbers.request_id, ttft=False).plain
                status = format_numbers(numbers, ttft_split_of(session, numbers.request_id))
                view.answer.set_status(f"{status} · {extra}" if extra else status)
                self.last_numbers = numbers
                if self.heat_on:  # the server's step array may have arrived with the row
                    self._paint_heat(view.answer)
        self._settling = (feed, view, left - 1) if left > 1 else None
        if left == 1:
            self._rejudge_earlier(view.answer)
            self.save_conversation()  # with the numbers that arrived after the stream

    def _rejudge_earlier(self, latest: AnswerView) -> None:
        """Redraw the numbers of earlier answers whose verdict changed since they were drawn: an
        answer that ended before the session's speed levels existed is classed once they do
        (core.detectors.speed_class), and its badge says so, as the panel's counts do."""
        session = self.port.view()
        for answer, feed in self.answer_feeds.items():
            old = answer.numbers
            if answer is latest or not answer.finished or old is None or feed.released:
                continue
            numbers = self.port.numbers(feed)
            if numbers.flag in (old.flag, "unjudged") or numbers.tokens is None:
                continue  # unchanged, or its row is no longer in the view
            answer.numbers = numbers
            extra = answer_diagnosis(session, numbers.request_id, ttft=False).plain
            status = format_numbers(numbers, ttft_split_of(session, numbers.request_id))
            answer.set_status(f"{status} · {extra}" if extra else status)

    @on(StatusLine.Clicked)
    def _badge_clicked(self, event: StatusLine.Clicked) -> None:
        """A click on an answer's numbers says why its badge says what it says."""
        self.why(event.answer.numbers)

    def action_why(self) -> None:
        """Say why the last answer was flagged (or that it was not)."""
        self.why(self.last_numbers)

    def why(self, n: AnswerNumbers | None) -> None:
        """Write the reasons of an answer's badge as a line in the conversation."""
        if n is None:
            message = "no finished answer yet"
        elif n.flag == "vanilla-speed":
            message = "VANILLA SPEED: " + "; ".join(n.reasons)
        elif n.flag in ("transition", "loop", "garbled"):
            message = f"{n.flag.upper()}: " + "; ".join(n.reasons)
        elif n.flag == "ok" and n.reasons:
            message = "not flagged: " + "; ".join(n.reasons)
        elif n.flag == "ok":
            message = "not flagged: the answer was not at vanilla speed"
        else:
            message = "not judged: no verdict on the answer yet"
        extra = answer_diagnosis(self.port.view(), n.request_id if n else None).plain
        self._notice("why: " + message + (f" · {extra}" if extra else ""))

    def action_cancel(self) -> None:
        if self.has_class("-panel-open"):  # Esc first closes the opened panel (F9)
            self.action_toggle_panel()
        elif self.feed is not None:
            self.feed.cancel()

    # ------------------------------------------------------------ acceptance heat, position worth

    def _n_spec(self) -> int | None:
        view = self.port.view()
        if view is not None and view.servers and view.servers[0].n_spec is not None:
            return view.servers[0].n_spec
        server = self.port.server
        return server.n_spec if server is not None else None

    def heat_of(self, answer: AnswerView) -> AnswerHeat | None:
        """The acceptance heat of an answer: from the server's per-step array on its row when
        the view has one (exact), else from its chunks' token counts."""
        feed = self.answer_feeds.get(answer)
        if feed is None or feed.released:  # a cancelled or failed answer keeps no chunks
            return None
        row = find_row(self.port.view(), feed.request_id, in_flight=False)
        return answer_heat(pieces_from_chunks(feed.chunks()), n_spec=self._n_spec(), row=row)

    def _paint_heat(self, answer: AnswerView) -> None:
        """Colour a finished answer (again only when its heat changed: the row with the
        server's step array arrived)."""
        if answer.finished:
            heat = self.heat_of(answer)
            if heat != answer.heat:
                answer.show_heat(heat, heat_styles(heat_colors(self.app.theme_variables)))

    def action_heat(self) -> None:
        """Toggle colouring the finished answers by engine step (a streaming answer is
        coloured when it ends); a legend line says what the shades mean."""
        self.heat_on = not self.heat_on
        self._show_heat()

    def _show_heat(self) -> None:
        styles = heat_styles(heat_colors(self.app.theme_variables))
        for answer in self.answer_feeds:
            if answer.finished:
                answer.show_heat(self.heat_of(answer) if self.heat_on else None, styles)
        legend = self.query_one("#heat-legend", Static)
        legend.update(heat_legend(styles, self._n_spec()) if self.heat_on else "")
        legend.display = self.heat_on

    def _theme_changed(self, _theme: object) -> None:
        if self.heat_on:
            self._show_heat()

    # ------------------------------------------------------------ settings and scrolling

    def action_settings(self) -> None:
        def apply(result: ChatSettings | None) -> None:
            if result is not None:
                self.settings = result
                self.post_message(SettingsChanged(result))
                self._notice(
                    "settings: temperature "
                    f"{blank(result.temperature) or 'default'}, top-p "
                    f"{blank(result.top_p) or 'default'}, max tokens "
                    f"{blank(result.max_tokens) or 'default'}"
                )
                self.save_conversation()

        self.app.push_screen(SettingsScreen(self.settings), apply)

    def chat_state(self) -> ChatState:
        """What the screen shows, as plain data (for saving and exporting)."""
        numbers = [view.answer.numbers for view in self.query(TurnView)]
        return ChatState(
            tuple(self.conversation.turns),
            numbers,
            self.port.server,
            self.settings,
            self.conversation.system,
        )

    def save_conversation(self) -> None:
        if self.chat_history is not None:
            self.chat_history.save(self.chat_state())

    def _restore_conversation(self) -> None:
        """A resumed conversation's turns back on screen (finished, with their numbers), in the
        context and in the prompt history; before the connection is made."""
        history = self.chat_history
        restored = [] if history is None else history.restored()
        if not restored:
            return
        prompt_input = self.query_one("#prompt", PromptInput)
        views = []
        for r in restored:
            self.conversation.turns.append(r.turn)
            view = TurnView(r.turn.prompt)
            view.answer.append(r.turn.answer)
            view.answer.numbers = r.numbers
            view.answer.finish(r.line, failed=r.failed)
            views.append(view)
            prompt_input.remember(r.turn.prompt)
        self.query_one("#conversation", VerticalScroll).mount(*views)
        line = None if history is None else history.resumed_line()
        if line is not None:
            self._notice(line)

    def action_export_markdown(self) -> None:
        """Write the conversation, with each answer's numbers, as Markdown (ctrl+s)."""
        history = self.chat_history or ChatHistory(None)
        line = history.export(self.chat_state())
        self._notice(line, failed=not line.startswith("exported"))

    def action_copy_answer(self, code: bool) -> None:
        """ctrl+y / ctrl+b: the last answer (or its last code block) to the terminal's clipboard
        (OSC 52, which a terminal may drop unsaid) and to a file the line names."""
        text, line, failed = answer_to_copy(self.conversation.turns, code=code)
        if text is not None:
            self.app.copy_to_clipboard(text)
            path, error = keep_copy(text)
            line, failed = copied_line(line, path, error), error is not None
        self._notice(line, failed=failed)

    def action_edit_last(self) -> None:
        """Take back the last turn (from the screen, the context and the saved conversation)
        and put its prompt back in the prompt line; Enter sends it again (ctrl+up)."""
        if self.feed is not None:
            self._notice("an answer is still streaming (Esc cancels it first)", failed=True)
            return
        turns = self.conversation.turns
        if not turns:
            self._notice("no prompt to edit yet", failed=True)
            return
        views = list(self.query(TurnView))
        turn = turns.pop()
        if len(views) == len(turns) + 1:
            view = views[-1]
            self.answer_feeds.pop(view.answer, None)
            if self._settling is not None and self._settling[1] is view:
                self._settling = None
            view.remove()
        prompt = self.query_one("#prompt", PromptInput)
        prompt.value = turn.prompt
        prompt.cursor_position = len(turn.prompt)
        prompt.focus()
        self.save_conversation()
        self._notice("last turn taken back: edit the prompt, Enter sends it again")

    def action_switch_model(self) -> None:
        """Pick the model for the next question among those the server lists (ctrl+t); the
        choice is saved with the conversation."""
        server = self.port.server
        models = self.port.models
        if not self.port.connected or server is None:
            self._notice("not connected: no model list yet (ctrl+r retries)", failed=True)
            return
        if len(models) < 2:
            self._notice(f"the server lists no other model than {visible_line(server.model)}")
            return

        def apply(model: str | None) -> None:
            current = self.port.server
            if model is None or (current is not None and model == current.model):
                return
            try:
                chosen = self.port.use_model(model)
            except ValueError as exc:
                self._notice(f"model not switched: {exc}", failed=True)
                return
            c = self.connection
            if c is not None and c.server is not None:  # keep the K the header completed
                shown = replace(c.server, model=chosen.model, max_model_len=chosen.max_model_len)
                self.connection = replace(c, server=shown)
                self.query_one(HeaderBar).show(shown)
            self._notice(f"model: {visible_line(chosen.model)} (from the next question)")
            self.save_conversation()

        self.app.push_screen(ModelScreen(models, server.model), apply)

    def action_system_prompt(self) -> None:
        from specmon.ui.screens.system_prompt import SystemPromptScreen

        def apply(text: str | None) -> None:
            if text is not None:
                self.conversation.system = text or None
                first = shorten(text.splitlines()[0], NOTICE_CELLS) if text else ""
                self._notice(f"system prompt set: {first}" if text else "no system prompt")
                self.save_conversation()

        self.app.push_screen(SystemPromptScreen(self.conversation.system), apply)

    def action_scroll_up(self) -> None:
        self.query_one("#conversation", VerticalScroll).scroll_page_up(animate=False)

    def action_scroll_down(self) -> None:
        self.query_one("#conversation", VerticalScroll).scroll_page_down(animate=False)

    def action_toggle_panel(self) -> None:
        """F9: where the panel is collapsed to its summary line (a short, narrow terminal), the
        whole panel in place of the conversation, focused so that the arrows and PgUp/PgDn
        scroll it; F9 again (or Esc) goes back to the conversation and the prompt. Elsewhere
        it moves the focus to the panel and back."""
        toggle_open(self.query_one(SidePanel), "-short", self.query_one("#prompt", PromptInput))

    def action_follow(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()

    # ------------------------------------------------------------ size

    def on_resize(self, event: Resize) -> None:
        self._update_too_small()

    def _update_too_small(self) -> None:
        width, height = self.size
        self.query_one(Footer).compact = width < NARROW_WIDTH  # more keys in 80 columns
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
