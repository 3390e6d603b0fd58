"""The help screen (F1 or ?): the keys of the screen it was opened on, then what every number
means, drawn from `core/definitions.py` (the same text as docs/definitions.md) and grouped the
way the screen shows them: the line under each answer, then the side panel's sections. A search
box keeps only the definitions that contain what is typed; Esc closes.

The text is built by pure functions (`help_sections`, `help_text`), tested without an app.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from specmon.core.definitions import DEFINITIONS, Definition, definition
from specmon.ui.palette import ActionCommand
from specmon.ui.widgets.keys_footer import KeysFooter
from specmon.ui.widgets.lines import TextLines
from specmon.ui.widgets.ordered_input import OrderedInput

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Under each answer (the answer line)",
        (
            "decode_tok_s",
            "ttft_s",
            "acceptance_length",
            "acceptance_source",
            "al_server",
            "al_chunks",
            "al_metrics",
            "draft_acceptance_rate",
            "merged_chunk",
            "missing",
        ),
    ),
    (
        "Panel: server",
        ("server_status", "n_spec", "spec_configured", "counter_reset"),
    ),
    ("Panel: speed", ("server_decode_tok_s",)),
    ("Panel: acceptance", ("window", "since_start")),
    (
        "Panel: positions (w: what each position is worth; h: acceptance heat)",
        ("per_position_rate", "expected_tokens", "position_share", "trim_hint", "heat"),
    ),
    ("Panel: load", ("running_waiting", "kv_cache_usage", "percentiles", "itl_s")),
    (
        "Panel: GPU",
        (
            "gpu_temperature",
            "gpu_power",
            "gpu_sm_clock",
            "gpu_memory",
            "gpu_utilization",
            "gpu_clock_events",
        ),
    ),
    (
        "Panel: flags (a flagged answer's badge; F3 says why)",
        (
            "verdict",
            "speed_levels",
            "vanilla_flag",
            "acceptance_near_zero",
            "net_loss",
            "throttling",
            "batch_contention",
            "spec_not_configured",
            "short_request",
            "vanilla_speed",
        ),
    ),
    (
        "Panel: flags, the cycle line",
        (
            "flags_own_requests",
            "window_vanilla",
            "cycle_period",
            "cycle_phases",
            "cycle_episodes",
            "share_degraded",
            "long_run_vs_peak",
        ),
    ),
    (
        "Panel: diagnosis (last section, when it has something to say; F3 adds the answer's)",
        (
            "al_by_context",
            "context_cliff",
            "thermal_attribution",
            "clock_fit",
            "power_limit_requested",
            "seconds_saved",
            "seconds_saved_reason",
            "quality_loop",
            "quality_garbled",
            "repeated_ngram_share",
            "al_z_score",
        ),
    ),
    (
        "Panel: diagnosis, the canary lines (watch --canary, chat in host mode)",
        (
            "canary_status",
            "canary_al",
            "canary_expected_al",
            "canary_tolerance",
            "canary_diagnosis",
        ),
    ),
    (
        "Elsewhere (F3 why: the TTFT split; answers table; bench reports)",
        ("e2e_tok_s", "tpot_s", "e2el_s", "server_ttft_s", "ttft_outside_s"),
    ),
)
"""The screen's groups, in screen order, with the keys of the definitions each explains."""

OTHER_TITLE = "Other numbers"


def help_sections() -> tuple[tuple[str, tuple[Definition, ...]], ...]:
    """(title, definitions) in screen order; a definition no section names (a new one) goes
    under OTHER_TITLE at the end, so the help never leaves a number out."""
    placed = {key for _, keys in SECTIONS for key in keys}
    out = [(title, tuple(definition(k) for k in keys)) for title, keys in SECTIONS]
    rest = tuple(d for d in DEFINITIONS if d.key not in placed)
    if rest:
        out.append((OTHER_TITLE, rest))
    return tuple(out)


def _matches(d: Definition, words: list[str]) -> bool:
    hay = f"{d.name} {d.unit} {d.short} {d.long} {d.key}".lower()
    return all(w in hay for w in words)


def off_prompt_note(command: ActionCommand) -> str:
    """For an action with one-letter keys (w, l, ?, r, m, h), e.g. " (r: not while typing in
    the prompt)": the chat's prompt takes those as text, so they work only when it is not
    focused (Tab or a click moves off it); "" otherwise."""
    letters = [k for k in command.keys if len(k) == 1]
    if not letters:
        return ""
    return f" ({' / '.join(letters)}: not while typing in the prompt)"


def help_text(
    query: str = "", keys: tuple[ActionCommand, ...] = (), *, prompt: bool = False
) -> tuple[Text, int]:
    """The help's text for a search (case-insensitive; every word must occur) and the number
    of definitions shown. `keys` (the screen's bound actions) come first when the search is
    empty or matches them; `prompt`: the screen has a text prompt, so one-letter keys say they
    do not work while typing in it."""
    words = query.lower().split()
    out = Text()
    if keys:
        shown_keys = [
            k
            for k in keys
            if all(w in f"{k.title} {' '.join(k.keys)} {k.action}".lower() for w in words)
        ]
        if shown_keys:
            out.append("Keys of this screen (ctrl+p lists them too)\n", style="bold underline")
            width = max(len(" / ".join(k.keys)) for k in shown_keys) + 2
            for k in shown_keys:
                out.append(f"  {' / '.join(k.keys):<{width}}", style="bold")
                out.append(f"{k.title}{off_prompt_note(k) if prompt else ''}\n")
            out.append("\n")
    count = 0
    for title, items in help_sections():
        chosen = [d for d in items if _matches(d, words)]
        if not chosen:
            continue
        out.append(f"{title}\n", style="bold underline")
        for d in chosen:
            count += 1
            out.append(f"  {d.name}", style="bold")
            if d.unit:  # the unit the screens show it in (latencies in ms)
                out.append(f" ({d.unit})", style="dim")
            out.append(f": {d.short}\n")
            if d.long:
                out.append(f"    {d.long}\n", style="dim")
        out.append("\n")
    if count == 0 and not out.plain:
        out.append(f"Nothing matches {query!r}.", style="italic")
    return out, count


class HelpScreen(ModalScreen[None]):
    """Every number's definition and the keys; type to search, Esc closes."""

    DEFAULT_CSS = """
    #help-box { width: 90%; height: 90%; }
    #help-search { height: 3; }
    #help-scroll { height: 1fr; }
    #help-count { color: $text-muted; height: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("f1", "close", "close", show=False),
    ]

    def __init__(self, keys: tuple[ActionCommand, ...] = (), *, prompt: bool = False) -> None:
        super().__init__()
        self.keys = keys
        self.prompt = prompt
        """The screen it was opened on has a text prompt (the chat)."""
        self.shown = 0
        """Definitions shown for the current search."""

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="dialog-box"):
            yield Label("Help: what every number means (type to search, Esc closes)")
            yield OrderedInput(placeholder="search, e.g. acceptance", id="help-search")
            yield Static("", id="help-count", markup=False)
            with VerticalScroll(id="help-scroll"):
                yield TextLines(id="help-body")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._show("")
        self.query_one("#help-search", Input).focus()

    @on(Input.Changed, "#help-search")
    def _search(self, event: Input.Changed) -> None:
        self._show(event.value)

    def _show(self, query: str) -> None:
        text, count = help_text(query, self.keys, prompt=self.prompt)
        self.shown = count
        self.query_one("#help-body", TextLines).update(text)
        total = len(DEFINITIONS)
        self.query_one("#help-count", Static).update(
            f"{count} of {total} definitions" + (f" match {query!r}" if query.strip() else "")
        )
        self.query_one("#help-scroll", VerticalScroll).scroll_home(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
