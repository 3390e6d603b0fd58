"""An answer's verdict, decided once for every screen: running, failed or cancelled; then the
quality sentinel's flag (loop, garbled: judged before speed); then a speed class that flags it
(transition, or vanilla-speed against the session's speed levels); then the vanilla-speed
verdict (flagged, ok once judged); else not judged. The chat's badge, the answers table, the
panel's counts, the replay's timeline, `--json`, the exporter and `watch`'s console all show
this one decision, each in its own words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specmon.core.views import RequestRow

VerdictKind = Literal[
    "running",
    "failed",
    "cancelled",
    "ok",
    "loop",
    "garbled",
    "transition",
    "vanilla-speed",
    "unjudged",
]
FLAGGED: frozenset[VerdictKind] = frozenset({"loop", "garbled", "transition", "vanilla-speed"})
"""The kinds that flag an answer (shown with their reasons)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a request's badge says: its kind, and why (the detectors' (code, sentence) pairs for
    a flag; the error for a failed or cancelled request, untrusted text)."""

    kind: VerdictKind
    reasons: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    @property
    def flagged(self) -> bool:
        return self.kind in FLAGGED

    @property
    def sentences(self) -> tuple[str, ...]:
        """The reasons in words (a reason without a sentence by its code)."""
        return tuple(text or code for code, text in self.reasons)


def request_verdict(row: RequestRow) -> Verdict:
    """The verdict of one request row: the quality flag first (a loop runs fast and a garbled
    answer runs slow, but neither says how the server runs), then a speed class that flags it
    (transition, vanilla-speed), then the vanilla-speed verdict; "ok" only once the vanilla
    verdict judged the request (a speed class of "ok" alone says it was fast, not that it was
    judged; it keeps the speed class's reason, if any: a slow answer whose acceptance was
    healthy says why it is not flagged)."""
    if row.outcome == "running":
        return Verdict("running")
    if row.outcome in ("failed", "cancelled"):
        return Verdict(row.outcome, error=row.error)
    if row.quality is not None:
        return Verdict(row.quality, ((row.quality, row.quality_evidence),))
    speed = row.speed_class
    if speed is not None and speed.kind != "ok":
        return Verdict(speed.kind, speed.reasons)
    vanilla = row.vanilla
    if vanilla is not None and vanilla.flagged:
        return Verdict("vanilla-speed", vanilla.reasons)
    if vanilla is not None and vanilla.judged:
        return Verdict("ok", speed.reasons if speed is not None else ())
    return Verdict("unjudged")
