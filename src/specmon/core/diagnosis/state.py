"""The diagnosis fold of a session: every analysis of this package, fed at each answer's end.

`Diagnosis` holds fixed-size state only (bins, running sums, rings of bounded length and a capped
text tail per in-flight answer), so a day-long session costs what a minute-long one does.
`view()` builds the immutable `DiagnosisView` that the session view carries. Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from specmon.core.diagnosis.context_cliff import ContextBins, ContextCliffView, answer_steps
from specmon.core.diagnosis.quality import (
    MAX_TEXT_CHARS,
    ALStats,
    HealthyAL,
    QualityVerdict,
    QualityView,
    check_answer,
)
from specmon.core.diagnosis.seconds_saved import (
    AnswerSaving,
    SavingsTotals,
    SecondsSavedView,
    answer_saving,
)
from specmon.core.diagnosis.thermal import (
    MAX_POINTS,
    AnswerPoint,
    PowerLimitView,
    StepClockFit,
    ThermalView,
    attribute,
    gpu_during,
)

MAX_TEXTS = 256
"""In-flight answers whose text tail is kept (the oldest is dropped beyond)."""
MAX_RECENT_SAVINGS = 100
MAX_FLAGGED = 100


@dataclass(frozen=True, slots=True)
class DiagnosisView:
    """The diagnosis's answers (docs/diagnosis.md), at one instant."""

    context: ContextCliffView
    thermal: ThermalView
    seconds_saved: SecondsSavedView
    quality: QualityView


@dataclass(frozen=True, slots=True)
class FinishedAnswer:
    """What the fold needs of one finished, ok answer."""

    request_id: str
    t: float | None
    prompt_tokens: int | None
    cumulative: tuple[int | None, ...]
    final_cut: bool
    completion_tokens: int | None
    t_first_token: float | None
    t_last_token: float | None
    decode_steps: int
    acceptance_length: float | None
    n_spec: int | None
    judge_reason: str | None
    partial: bool = False
    """Recorded in part: its token count and spans are not the answer's (no thermal point, no
    seconds saved)."""


class Diagnosis:
    """Fold of finished answers (and the text of running ones) into the diagnosis views."""

    def __init__(self) -> None:
        self.context = ContextBins()
        self.fit = StepClockFit()
        self.points: deque[AnswerPoint] = deque(maxlen=MAX_POINTS)
        self.savings = SavingsTotals()
        self.recent_savings: deque[AnswerSaving] = deque(maxlen=MAX_RECENT_SAVINGS)
        self.al_stats = ALStats()
        self.healthy = HealthyAL()
        self.checked = 0
        self.loops = 0
        self.garbled = 0
        self.flagged: deque[QualityVerdict] = deque(maxlen=MAX_FLAGGED)
        self.texts: dict[str, list[str]] = {}
        self._text_len: dict[str, int] = {}
        self.power_limits: tuple[PowerLimitView, ...] = ()
        self._cache: DiagnosisView | None = None

    def text(self, request_id: str, piece: str) -> None:
        """Keep the tail of a running answer's text (at most ~2 x MAX_TEXT_CHARS)."""
        if not piece:
            return
        parts = self.texts.get(request_id)
        if parts is None:
            if len(self.texts) >= MAX_TEXTS:
                oldest = next(iter(self.texts))
                del self.texts[oldest]
                del self._text_len[oldest]
            parts = self.texts[request_id] = []
            self._text_len[request_id] = 0
        parts.append(piece)
        size = self._text_len[request_id] + len(piece)
        if size > 2 * MAX_TEXT_CHARS:
            tail = "".join(parts)[-MAX_TEXT_CHARS:]
            parts[:] = [tail]
            size = len(tail)
        self._text_len[request_id] = size

    def drop(self, request_id: str) -> None:
        """Forget a running answer's text (it failed or was cancelled)."""
        self.texts.pop(request_id, None)
        self._text_len.pop(request_id, None)

    def gpu_limits(self, limits: tuple[PowerLimitView, ...]) -> None:
        if limits != self.power_limits:
            self.power_limits = limits
            self._cache = None

    def answer(
        self,
        a: FinishedAnswer,
        gpu_samples: Iterable[tuple[float, float | None, float | None, float | None]],
        baseline_tok_s: float | None,
    ) -> QualityVerdict | None:
        """Fold one finished ok answer; returns the quality sentinel's verdict on it. Quality is
        judged first: a loop or garbled answer is left out of AL by context and of the thermal
        attribution (its AL says nothing of how the server runs)."""
        self._cache = None
        parts = self.texts.pop(a.request_id, None)
        self._text_len.pop(a.request_id, None)
        al = a.acceptance_length
        verdict = check_answer(
            a.request_id,
            a.t,
            "".join(parts) if parts else "",
            a.completion_tokens,
            al,
            self.healthy,
            a.n_spec,
        )
        if verdict is not None:
            self.checked += 1
            if verdict.flag is not None:
                self.flagged.append(verdict)
                self.loops += verdict.flag == "loop"
                self.garbled += verdict.flag == "garbled"
            elif al is not None:
                self.al_stats.add(al)  # flagged answers do not move the usual
                self.healthy.add(al)
        quality_flagged = verdict is not None and verdict.flag is not None
        if not quality_flagged:
            self.context.add_answer(
                answer_steps(a.prompt_tokens, a.cumulative, n_spec=a.n_spec, final_cut=a.final_cut)
            )
        decode_s = None
        if a.t_first_token is not None and a.t_last_token is not None:
            span = a.t_last_token - a.t_first_token
            decode_s = span if span > 0 else None
        if (
            not quality_flagged
            and not a.partial
            and decode_s is not None
            and a.decode_steps > 0
            and al
            and a.completion_tokens
        ):
            clock, temp, power = gpu_during(
                gpu_samples, a.t_first_token or 0.0, a.t_last_token or 0.0
            )
            step_s = decode_s / a.decode_steps
            if clock is not None:
                self.fit.add(clock, step_s)
            self.points.append(
                AnswerPoint(
                    t=a.t or 0.0,
                    decode_tok_s=(a.completion_tokens - 1) / decode_s,
                    step_s=step_s,
                    acceptance_length=al,
                    sm_clock_mhz=clock,
                    temperature_c=temp,
                    power_w=power,
                )
            )
        saving = (
            None
            if a.partial
            else answer_saving(
                a.request_id,
                a.t,
                a.completion_tokens,
                decode_s,
                baseline_tok_s,
                al,
                a.judge_reason,
            )
        )
        if saving is not None:
            self.savings.add(saving)
            self.recent_savings.append(saving)
        return verdict

    def view(self, baseline_tok_s: float | None) -> DiagnosisView:
        if self._cache is None or self._cache.seconds_saved.baseline_tok_s != baseline_tok_s:
            self._cache = DiagnosisView(
                context=self.context.view(),
                thermal=attribute(tuple(self.points), self.fit, self.power_limits),
                seconds_saved=self.savings.view(baseline_tok_s, tuple(self.recent_savings)),
                quality=QualityView(
                    checked=self.checked,
                    loops=self.loops,
                    garbled=self.garbled,
                    al_mean=self.al_stats.mean if self.al_stats.n else None,
                    al_std=self.al_stats.std(),
                    flagged=tuple(self.flagged),
                ),
            )
        return self._cache
