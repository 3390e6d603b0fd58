"""The "diagnosis" section of the dashboard (docs/diagnosis.md): acceptance by context length, the
thermal attribution, seconds saved, quality flags and the canary of each server, and one answer's
line for its status / F3 "why" (seconds saved or cost, quality flag, server vs client TTFT).

Everything is built by pure functions from the typed views (`core.diagnosis`, `core.canary`,
`core.server_timing`) into Textual `Content` whose colours are theme variables ($warning,
$error, $success, $text-muted), tested without an app. A part says nothing (no line) until it
has something to say; the section is hidden while every part is silent. Untrusted text (server
addresses, evidence quoted from the model's output, reasons) is shown literally on one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from specmon.core.canary import CanaryView
from specmon.core.diagnosis.context_cliff import MIN_BIN_STEPS, ContextBinView, ContextCliffView
from specmon.core.diagnosis.quality import QualityVerdict, QualityView
from specmon.core.diagnosis.seconds_saved import AnswerSaving, SecondsSavedView
from specmon.core.diagnosis.state import DiagnosisView
from specmon.core.diagnosis.thermal import ThermalView
from specmon.core.server_timing import TtftSplit
from specmon.core.views import SessionView
from specmon.ui.formatting import shorten, visible_line

LEVELS = "▁▂▃▄▅▆▇█"
"""The bar chart's eighths (the same as the panel's sparklines)."""
MAX_QUALITY_LINES = 2
"""The newest flagged answers listed; the count line says how many there were."""
MAX_LINE = 48
"""Characters of one line of untrusted text (evidence, reasons, addresses) before it is cut."""

STATUS_STYLE: dict[str, str] = {
    "learning": "$text-muted",
    "ok": "$success",
    "drifting": "$warning",
    "drifted": "bold $error",
    "failed": "$error",
}
"""The canary status in theme colours."""


def _cut(text: str | None, width: int = MAX_LINE) -> str:
    return shorten(visible_line(text), width)


def tokens_label(tokens: int | None) -> str:
    """A context length in tokens as the bins name it: 512, 8k, 20k."""
    if tokens is None:
        return "∞"
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return str(tokens)


def context_chart(bins: Sequence[ContextBinView]) -> str:
    """One character per bin with steps, from the first to the last such bin, height = AL on a
    fixed scale 1..the highest bin AL (a bin with no step in between is a space; one with fewer
    than MIN_BIN_STEPS steps is a dot, too thin to read)."""
    filled = [i for i, b in enumerate(bins) if b.steps and b.acceptance_length is not None]
    if not filled:
        return ""
    top = max(bins[i].acceptance_length or 1.0 for i in filled)
    chars: list[str] = []
    for b in bins[filled[0] : filled[-1] + 1]:
        al = b.acceptance_length
        if not b.steps or al is None:
            chars.append(" ")
        elif b.steps < MIN_BIN_STEPS:
            chars.append("·")
        else:
            frac = 0.0 if top <= 1.0 else min(1.0, max(0.0, (al - 1.0) / (top - 1.0)))
            chars.append(LEVELS[min(len(LEVELS) - 1, int(frac * (len(LEVELS) - 1) + 0.5))])
    return "".join(chars)


def context_lines(view: ContextCliffView) -> list[Content]:
    """The cliff's summary and the AL-by-context chart: nothing until steps fall in two bins."""
    filled = [b for b in view.bins if b.steps and b.acceptance_length is not None]
    if len(filled) < 2 and not view.detected:
        return []
    lines: list[Content] = []
    if view.detected and view.summary:
        lines.append(Content.styled(_cut(view.summary), "$warning"))
    first, last = filled[0], filled[-1]
    lo = f"{tokens_label(first.lo_tokens):>4}"
    hi = f"{tokens_label(last.hi_tokens) if last.hi_tokens else tokens_label(last.lo_tokens) + '+'}"
    al_lo = f"{first.acceptance_length:.1f}" if first.acceptance_length is not None else "—"
    al_hi = f"{last.acceptance_length:.1f}" if last.acceptance_length is not None else "—"
    lines.append(
        Content.assemble(
            ("ctx ", "$text-muted"),
            lo,
            " ",
            (context_chart(view.bins), "$accent"),
            f" {hi}  AL {al_lo}→{al_hi}",
        )
    )
    return lines


def thermal_lines(view: ThermalView) -> list[Content]:
    """The slowdown's attribution when the latest answers are slow, and every GPU whose enforced
    power limit is not the requested one."""
    lines: list[Content] = []
    if view.slow and view.summary:
        style = "$error" if view.cause == "clock" else "$warning"
        # "the GPU clock fell 1725→1365 MHz at 91 °C" / "(70% of the slowdown; acceptance 20%)"
        head, paren, rest = view.summary.rpartition(" (")
        if not paren:
            head = rest
        lines.append(Content.styled(_cut(head), style))
        if paren:
            lines.append(Content.styled("  " + _cut(paren.strip() + rest), style))
    for p in view.power_limits:
        if not p.differs:
            continue
        req = "—" if p.requested_w is None else f"{p.requested_w:.0f}"
        enf = "—" if p.enforced_w is None else f"{p.enforced_w:.0f}"
        lines.append(
            Content.styled(
                f"GPU {p.gpu_index} power limit {enf} W enforced, {req} W requested", "$warning"
            )
        )
    return lines


def seconds_text(saved_s: float) -> str:
    """Seconds saved (+) or cost (-), with one decimal; what rounds to zero is "0.0 s", with no
    sign (never "-0.0 s")."""
    shown = f"{abs(saved_s):.1f}"
    if float(shown) == 0:
        return f"{shown} s"
    return f"{'+' if saved_s > 0 else '-'}{shown} s"


def saving_text(saving: AnswerSaving) -> Content:
    """One answer's seconds saved, or the time it cost and why."""
    if not saving.cost:
        return Content.styled(f"saved {abs(saving.saved_s):.1f} s", "$success")
    out = Content.styled(f"cost {abs(saving.saved_s):.1f} s", "bold $error")
    if saving.reason:
        out = out + Content(f" ({_cut(saving.reason)})")
    return out


def saved_lines(view: SecondsSavedView) -> list[Content]:
    """Seconds saved this session against the vanilla baseline, and the last answer's."""
    if view.baseline_tok_s is None or view.answers == 0:
        return []
    n = view.answers
    total_s = seconds_text(view.saved_s)
    total = Content.assemble(
        ("saved ", "$text-muted"),
        (total_s, "bold $error" if total_s.startswith("-") else "$success"),
        f" this session ({n} answer{'' if n == 1 else 's'}",
        (f", {view.answers_cost} cost time" if view.answers_cost else "", "$warning"),
        f"; vanilla {view.baseline_tok_s:.0f} tok/s)",
    )
    lines = [total]
    if view.recent:
        lines.append(
            Content.assemble(("last answer ", "$text-muted"), saving_text(view.recent[-1]))
        )
    return lines


def verdict_text(verdict: QualityVerdict) -> Content:
    """One flagged answer: its flag, AL and the evidence."""
    flag = verdict.flag or "?"
    evidence = verdict.evidence or f"AL {verdict.acceptance_length:.2f}"
    return Content.assemble((flag, "bold $error"), ": ", _cut(evidence, 2 * MAX_LINE))


def quality_lines(view: QualityView) -> list[Content]:
    """The loop / garbled answers (the newest few); nothing while none was flagged."""
    if not view.flagged:
        return []
    lines = [
        Content.styled(
            f"quality: {view.loops} loop, {view.garbled} garbled of {view.checked} answers",
            "$error",
        )
    ]
    lines += [verdict_text(v) for v in view.flagged[-MAX_QUALITY_LINES:]]
    return lines


def canary_lines(canaries: Sequence[CanaryView], *, name_servers: bool) -> list[Content]:
    """Each probed server's canary: status, AL vs the expected, and the advice."""
    lines: list[Content] = []
    for c in canaries:
        head = Content.assemble(
            ("canary ", "$text-muted"),
            (_cut(c.source, 24) + " " if name_servers else "", ""),
            (c.status, STATUS_STYLE.get(c.status, "")),
        )
        if c.status == "learning":
            head = head + Content(f" {c.learned_probes}/{c.learn_probes} probes")
        elif c.acceptance_length is not None:
            expected = "—" if c.expected_al is None else f"{c.expected_al:.2f}"
            band = "" if c.tolerance is None else f" ± {c.tolerance:.2f}"  # the noise band
            head = head + Content(f" AL {c.acceptance_length:.2f} vs {expected}{band} expected")
        lines.append(head)
        if c.error:  # a failed probe's error, or a note (a stored entry skipped, ...)
            style = "$error" if c.status == "failed" else "$warning"
            lines.append(Content.styled("  " + _cut(c.error), style))
        if c.advice:
            lines.append(Content.styled("  " + _cut(c.advice, 2 * MAX_LINE), "$warning"))
    return lines


def diagnosis_lines(
    diagnosis: DiagnosisView | None, canaries: Sequence[CanaryView] = ()
) -> list[Content]:
    """Every part of the section that has something to say, in order: canary, quality, thermal,
    seconds saved, context."""
    lines = canary_lines(canaries, name_servers=len(canaries) > 1)
    if diagnosis is not None:
        lines += quality_lines(diagnosis.quality)
        lines += thermal_lines(diagnosis.thermal)
        lines += saved_lines(diagnosis.seconds_saved)
        lines += context_lines(diagnosis.context)
    return lines


def diagnosis_content(view: SessionView | None) -> Content:
    """The section's text for one view (empty: nothing to say)."""
    if view is None:
        return Content("")
    return Content("\n").join(diagnosis_lines(view.diagnosis, view.canaries))


# ------------------------------------------------------------------ one answer


def ttft_text(split: TtftSplit) -> str:
    """ "TTFT 120 ms (engine 40 ms, outside 80 ms)": the client's time to first token, split into
    the server's own (vLLM's per-request timing) and the rest (network, proxy, client)."""

    def ms(s: float) -> str:
        return f"{s * 1000:.0f} ms"

    return (
        f"TTFT {ms(split.client_ttft_s)} (engine {ms(split.server_ttft_s)}, "
        f"outside {ms(split.outside_s)})"
    )


def ttft_split_of(view: SessionView | None, request_id: str | None) -> TtftSplit | None:
    """The answer's TTFT split (engine vs outside) when its row has one."""
    if view is None or request_id is None:
        return None
    row = next((r for r in view.rows if r.request_id == request_id), None)
    return None if row is None else row.ttft_split


def answer_diagnosis(
    view: SessionView | None, request_id: str | None, *, ttft: bool = True
) -> Content:
    """One answer's diagnosis on one line: seconds saved or cost (with the reason), its quality
    flag, and (`ttft`) server vs client TTFT; empty when there is none of these. Under an
    answer, whose numbers line has the TTFT already (`format_numbers` with the split), `ttft`
    is False: TTFT is said once."""
    if view is None or request_id is None:
        return Content("")
    parts: list[Content] = []
    diagnosis = view.diagnosis
    if diagnosis is not None:
        saving = next(
            (s for s in diagnosis.seconds_saved.recent if s.request_id == request_id), None
        )
        if saving is not None:
            parts.append(saving_text(saving))
        verdict = next((v for v in diagnosis.quality.flagged if v.request_id == request_id), None)
        if verdict is not None:
            parts.append(verdict_text(verdict))
    split = ttft_split_of(view, request_id) if ttft else None
    if split is not None:
        parts.append(Content(ttft_text(split)))
    return Content(" · ").join(parts)


def saved_by_request(view: SessionView | None) -> dict[str, AnswerSaving]:
    """The kept answers' savings by request id (for a table's column)."""
    if view is None or view.diagnosis is None:
        return {}
    return {s.request_id: s for s in view.diagnosis.seconds_saved.recent}


SAVED_COLUMN = "saved"
"""The answers table's (F4) column of seconds saved (+) or cost (-) against the baseline."""


def saved_cell(saving: AnswerSaving | None) -> str:
    """One answer's cell of the saved column: "+2.8 s", "-0.8 s cost", "0.0 s" (neither, to a
    tenth of a second), — without a baseline."""
    if saving is None:
        return "—"
    text = seconds_text(saving.saved_s)
    return text + (" cost" if saving.cost and text.startswith("-") else "")


class DiagnosisSection(Static):
    """The panel's "diagnosis" section: hidden while there is nothing to say."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes, markup=False)
        self.border_title = "diagnosis"
        self._shown: Content | None = None
        self.display = False

    def show(self, view: SessionView | None) -> None:
        """Redraw when the text changed; hide when it is empty."""
        content = diagnosis_content(view)
        if self._shown is not None and content.is_same(self._shown):
            return
        self._shown = content
        self.update(content)
        self.display = bool(content.plain)
