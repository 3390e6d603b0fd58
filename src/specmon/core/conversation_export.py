"""A saved conversation as Markdown: the server and sampling settings, the system prompt, then
each prompt and answer with the answer's numbers (tokens, decode tok/s, TTFT, AL and its source,
acceptance, verdict). A system prompt changed during the conversation (ctrl+o) is written where
it took effect, before the first turn sent with it ("System prompt from here on:"). Pure:
`specmon chat --export-chat ID FILE` and the chat screen's export key write what this returns.

Prompts and answers are written as they are (an answer is Markdown already); a prompt goes in a
block quote so it stays apart from the answer whatever it holds. Control characters (an ESC that
would act on the terminal of whoever `cat`s the file, or of `--export-chat ID -`) and bidi
controls are replaced by visible stand-ins, by the same rule as the screen (core/display_text.py).
"""

from __future__ import annotations

from specmon.core.chat_record import SavedConversation, SavedNumbers, SavedTurn
from specmon.core.display_text import visible

DASH = "—"
VERDICT_WORDS = {
    "ok": "not at vanilla speed",
    "transition": "TRANSITION",
    "loop": "LOOP",
    "garbled": "GARBLED",
    "vanilla": "VANILLA SPEED",
    "failed": "failed",
    "unjudged": "not judged",
}


def numbers_line(n: SavedNumbers) -> str:
    """One answer's numbers in words; what was not measured is —."""

    def num(value: float | None, spec: str) -> str:
        return DASH if value is None else format(value, spec)

    al = num(n.acceptance_length, ".2f")
    if n.acceptance_length is not None and n.al_source:
        al += f" ({'/metrics' if n.al_source == 'metrics' else n.al_source})"
    parts = [
        f"{DASH if n.tokens is None else n.tokens} tokens",
        f"{num(n.decode_tok_s, '.1f')} tok/s",
        f"TTFT {DASH if n.ttft_s is None else format(n.ttft_s * 1000, '.0f') + ' ms'}",
        f"AL {al}",
        f"accept {DASH if n.acceptance_rate is None else format(n.acceptance_rate, '.0%')}",
        f"verdict: {VERDICT_WORDS.get(n.verdict, n.verdict)}",
    ]
    line = " · ".join(parts)
    if n.reasons:
        line += " (" + "; ".join(n.reasons) + ")"
    return line


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


def _turn(index: int, turn: SavedTurn) -> list[str]:
    out = [f"## {index}. Prompt", "", _quote(turn.prompt), "", "### Answer", ""]
    out.append(turn.answer if turn.answer else "*(no answer)*")
    out.append("")
    if turn.status == "cancelled":
        out += ["*cancelled: partial answer*", ""]
    elif turn.status == "failed":
        out += [f"*failed: {turn.error or 'the request failed'}*", ""]
    if turn.numbers is not None:
        out += [f"*{numbers_line(turn.numbers)}*", ""]
    return out


def to_markdown(conversation: SavedConversation) -> str:
    """The whole conversation as one Markdown document (ends with a newline)."""
    c = conversation
    s = c.server
    out = [f"# {c.title or 'Conversation'}", ""]
    facts: list[str] = []
    if s.url:
        facts.append(f"- server: {s.url}" + (" (SIMULATED)" if s.simulated else ""))
    elif s.simulated:
        facts.append("- server: SIMULATED")
    if s.model:
        facts.append(f"- model: {s.model}")
    if s.draft_model:
        facts.append(f"- draft: {s.draft_model}")
    if s.n_spec is not None:
        facts.append(f"- n_spec: {s.n_spec}")

    def setting(value: float | int | None) -> str:
        return "server default" if value is None else str(value)

    st = c.settings
    facts.append(
        f"- sampling: temperature {setting(st.temperature)}, top-p {setting(st.top_p)}, "
        f"max tokens {setting(st.max_tokens)}"
    )
    if c.created_at:
        facts.append(f"- started: {c.created_at}")
    out += [*facts, ""]
    recorded = [t.system for t in c.turns if t.system is not None]
    if not recorded:  # saved before turns kept their own: the conversation's, as it applied
        if st.system:
            out += ["System prompt:", "", _quote(st.system), ""]
        for i, turn in enumerate(c.turns, 1):
            out += _turn(i, turn)
        return visible("\n".join(out).rstrip("\n") + "\n")
    # Each system prompt where it took effect: the first turn's at the top, a change before
    # the first turn sent with it, one set after the last turn at the end.
    current = recorded[0]
    if current:
        out += ["System prompt:", "", _quote(current), ""]
    for i, turn in enumerate(c.turns, 1):
        if turn.system is not None and turn.system != current:
            out += _system_change(turn.system)
            current = turn.system
        out += _turn(i, turn)
    if (st.system or "") != current:
        out += _system_change(st.system or "", later=True)
    return visible("\n".join(out).rstrip("\n") + "\n")


def _system_change(system: str, *, later: bool = False) -> list[str]:
    """The lines saying the system prompt changed here ("": removed); `later`: after the last
    turn (it applies to the next prompt)."""
    when = "for the next prompt" if later else "from here on"
    if not system:
        return [f"*System prompt removed {when}.*", ""]
    return [f"System prompt {when}:", "", _quote(system), ""]
