"""Score specmon's verdicts against the simulator's ground truth, on the labelled corpus.

    PYTHONPATH=src python3 benchmarks/verdicts.py                 # Markdown tables
    PYTHONPATH=src python3 benchmarks/verdicts.py --json          # the same as JSON
    PYTHONPATH=src python3 benchmarks/verdicts.py --corpus DIR    # another corpus

Every scenario of the corpus (tests/verdict_corpus/, made by benchmarks/make_verdict_corpus.py)
is a recording and its truth file. The recording is read by the replay's reader
(sources.recording_player.RecordingReader) and folded event by event into a fresh SessionState,
exactly as `specmon replay` folds it (the replay screen's first pass, `replay --json`), so every
verdict is the one the app shows. The truth file is read only here, never by the app.

Per-request verdicts (each finished answer of the recording, joined to its truth line by request
id): the vanilla-speed badge and the transition badge (the row's verdict at the end of the
recording, as the panel and F4 show it: its speed class unless it is a loop or garbled), the
loop and the garbled flags (the quality sentinel).
Per-session verdicts: the degradation cycle (found, period), the context cliff (found, where),
the thermal attribution (the cause named), the canary (its status after each probe). The
definitions of truth and of each score are in docs/diagnosis.md ("Scored against ground truth").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "verdict_corpus"

REQUEST_VERDICTS = ("vanilla-speed", "transition", "loop", "garbled")
SESSION_VERDICTS = ("cycle", "context", "thermal", "canary")
SPLITS = ("all", "tuning", "held-out")

VANILLA_RATIO = 1.1
"""An answer at most this many times the vanilla speed ran at vanilla speed (sim.truth)."""
BASE_CLOCK_MHZ = 1725.0
"""The simulated GPU's base SM clock (sim.drift)."""
DRIFTED_SHARE = 0.7
"""The canary's target: it must not say "ok" after a probe served while the engine ran at least
30% below its healthy AL (truth `al_share` < 0.7)."""


# ---------------------------------------------------------------- scores


@dataclass(slots=True)
class Counts:
    """A binary verdict's confusion counts over scored answers."""

    answers: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, *, truth: bool, flagged: bool) -> None:
        self.answers += 1
        if flagged and truth:
            self.tp += 1
        elif flagged:
            self.fp += 1
        elif truth:
            self.fn += 1

    def merged(self, other: Counts) -> Counts:
        return Counts(
            self.answers + other.answers,
            self.tp + other.tp,
            self.fp + other.fp,
            self.fn + other.fn,
        )

    @property
    def positives(self) -> int:
        return self.tp + self.fn

    @property
    def flagged(self) -> int:
        return self.tp + self.fp

    @property
    def precision(self) -> float | None:
        """TP / flagged; None when nothing was flagged."""
        return self.tp / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        """TP / truly positive; None when nothing was positive."""
        return self.tp / self.positives if self.positives else None

    @property
    def false_alarms_per_100(self) -> float | None:
        """FP per 100 scored answers; None with no answer."""
        return 100.0 * self.fp / self.answers if self.answers else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "positives": self.positives,
            "flagged": self.flagged,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": _r(self.precision),
            "recall": _r(self.recall),
            "false_alarms_per_100": _r(self.false_alarms_per_100),
        }


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(slots=True)
class SessionVerdict:
    """One per-session verdict of one scenario against its truth."""

    truth: Any
    found: bool
    value: Any
    correct: bool
    note: str = ""


@dataclass(slots=True)
class ScenarioScore:
    name: str
    split: str
    answers: int
    unmatched: int
    """Finished answers of the recording without a truth line (should be 0)."""
    requests: dict[str, Counts] = field(default_factory=dict)
    sessions: dict[str, SessionVerdict] = field(default_factory=dict)
    flags_at_end: int = 0
    """Answers whose badge was vanilla-speed when they ended (the timeline's count)."""


# ---------------------------------------------------------------- truth


def read_truth(
    path: Path,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The session line, the request lines by request id (in file order) and the restarts."""
    session: dict[str, Any] = {}
    requests: dict[str, dict[str, Any]] = {}
    restarts: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path.name}: line {number}: not JSON ({err.msg})") from None
        kind = value.get("kind") if isinstance(value, dict) else None
        if kind == "session":
            session = value
        elif kind == "request":
            requests[str(value["request_id"])] = value
        elif kind == "restart":
            restarts.append(value)
    return session, requests, restarts


def level(state: str) -> str:
    """The engine level a truth state stands for, for "a change of state": slow (degraded),
    mid (transition) or fast (fast, drifted, loop, garbled: a loop or garbled answer is a
    quality failure of one answer, not a change of the engine's speed)."""
    return {"degraded": "slow", "transition": "mid"}.get(state, "fast")


def near_change(levels: Sequence[str], i: int) -> bool:
    """Whether answer `i` is within one answer of a change of level: a change between
    answers j-1 and j for some j with i in j-2..j+1."""
    return any(levels[j] != levels[j - 1] for j in range(max(1, i - 1), min(len(levels), i + 3)))


def observed_period(slow: Sequence[bool]) -> int | None:
    """The smallest period P (2..n/2) with which the slow/not-slow sequence repeats itself at
    90% of its positions or more; None when there is none (or nothing slow)."""
    n = len(slow)
    if not any(slow) or all(slow):
        return None
    for p in range(2, n // 2 + 1):
        pairs = n - p
        same = sum(1 for i in range(pairs) if slow[i] == slow[i + p])
        if same >= 0.9 * pairs:
            return p
    return None


def thermal_truth(answers: Sequence[dict[str, Any]], latest: int = 5) -> str | None:
    """The true main cause of the latest answers' slowdown, as the thermal view compares them:
    the latest `latest` answers against the fastest quarter of the earlier ones, by their true
    speed (expected AL x SM clock: a step takes base clock / clock longer). The slowdown splits
    as ln(speed ratio) = ln(AL ratio) + ln(clock ratio); the larger part is the cause ("clock"
    or "acceptance"); None when the latest answers are less than 10% slower."""
    timed = [
        (t["expected_al"], (t.get("clock_mhz") or [None, None])[-1] or BASE_CLOCK_MHZ)
        for t in answers
        if t.get("expected_al") is not None and t.get("state") not in ("loop", "garbled")
    ]
    if len(timed) < latest + 4:
        return None
    now, earlier = timed[-latest:], timed[:-latest]
    earlier = sorted(earlier, key=lambda p: p[0] * p[1], reverse=True)[: max(1, len(earlier) // 4)]

    def mean(points: Sequence[tuple[float, float]], i: int) -> float:
        return sum(p[i] for p in points) / len(points)

    al_ratio = mean(now, 0) / mean(earlier, 0)
    clock_ratio = mean(now, 1) / mean(earlier, 1)
    if al_ratio * clock_ratio > 0.9:
        return None
    return "clock" if math.log(clock_ratio) < math.log(al_ratio) else "acceptance"


# ---------------------------------------------------------------- one scenario


def fold(
    recording: Path, baseline_tok_s: float | None = None
) -> tuple[Any, int, list[tuple[Any, Any]]]:
    """Fold a recording as the replay does (with `specmon replay --baseline` where the manifest
    gives one: a real server's recording made with `bench --baseline`; else the baseline its
    header carries; never a stored one, so the score does not depend on this machine's store);
    returns the final view, the answers whose first verdict (as the timeline draws it) flagged
    them, and (probe event, canary view after it) for every probe."""
    from specmon.core.events import CanaryProbed
    from specmon.core.session_state import SessionState
    from specmon.sources.recording_player import RecordingReader

    problems: list[Any] = []
    reader = RecordingReader(str(recording), problems)
    try:
        if baseline_tok_s is None and reader.baseline is not None:
            baseline_tok_s = reader.baseline.tok_s  # the one the recorded session was judged by
        state = SessionState(reader.info, baseline_tok_s=baseline_tok_s)
        first: dict[str, str] = {}  # each request's first verdict, as the timeline shows it
        seen = 0
        probes: list[tuple[Any, Any]] = []
        for event in reader:
            state.apply(event)
            made = state.verdict_changes_made
            for change in state.newest_verdict_changes(made - seen):
                first.setdefault(change.request_id, change.kind)
            seen = made
            if isinstance(event, CanaryProbed):
                view = state.view()
                canary = next((c for c in view.canaries if c.source == event.source), None)
                probes.append((event, canary))
        return state.view(), sum(k == "vanilla-speed" for k in first.values()), probes
    finally:
        reader.close()


def shown_badge(row: Any) -> str:
    """The verdict every screen shows for a finished row (core.verdict.request_verdict): a
    LOOP or GARBLED answer shows that, not its speed class (quality is judged before speed), so
    a loop served at vanilla speed is not a vanilla-speed badge."""
    from specmon.core.verdict import request_verdict

    return str(request_verdict(row).kind)


def score_scenario(
    name: str,
    split: str,
    recording: Path,
    truth_path: Path,
    baseline_tok_s: float | None = None,
) -> ScenarioScore:
    from specmon.core.diagnosis.context_cliff import bin_index

    session, truths, _restarts = read_truth(truth_path)
    view, at_end, probes = fold(recording, baseline_tok_s)
    rows = sorted(
        (r for r in view.rows if r.outcome != "running"),
        key=lambda r: r.t_send if r.t_send is not None else r.t_end or 0.0,
    )
    joined = [(r, truths[r.request_id]) for r in rows if r.request_id in truths]
    score = ScenarioScore(name, split, len(rows), len(rows) - len(joined), flags_at_end=at_end)
    counts = {v: Counts() for v in REQUEST_VERDICTS}
    quality: dict[str, str] = {}
    diagnosis = view.diagnosis
    if diagnosis is not None:
        for verdict in diagnosis.quality.flagged:
            if verdict.flag is not None:
                quality[verdict.request_id] = verdict.flag
    ok = [(r, t) for r, t in joined if r.outcome == "ok" and t["state"] != "overflow-retry"]
    levels = [level(t["state"]) for _r, t in ok]
    for i, (row, truth) in enumerate(ok):
        state = truth["state"]
        kind = shown_badge(row)
        if state != "garbled":  # quality before speed: a garbled answer is the garbled flag's
            counts["vanilla-speed"].add(truth=state == "degraded", flagged=kind == "vanilla-speed")
        badge = kind == "transition"
        if badge:  # precision: a badge is right within one answer of a change of state
            right = near_change(levels, i)
            counts["transition"].add(truth=right, flagged=True)
        else:
            counts["transition"].add(truth=state == "transition", flagged=False)
        counts["loop"].add(truth=state == "loop", flagged=quality.get(row.request_id) == "loop")
        counts["garbled"].add(
            truth=state == "garbled", flagged=quality.get(row.request_id) == "garbled"
        )
    score.requests = counts

    # cycle: the period the recorded answers show (the engine's, as this client saw it)
    cycle = view.cycle
    found = bool(cycle is not None and cycle.detected)
    period = cycle.period if cycle is not None and found else None
    expected = (
        observed_period([t.get("phase") == "d" for _r, t in ok])
        if session.get("cycle_period") is not None
        else None
    )
    correct = (not found) if expected is None else (found and abs((period or 0) - expected) <= 1)
    score.sessions["cycle"] = SessionVerdict(
        expected, found, period, correct, f"engine period {session.get('cycle_period')}"
    )

    # context cliff: the bin of the context where AL is halfway down
    cliff = session.get("context_cliff_tokens")
    reached = max(
        ((t.get("prompt_tokens") or 0) + (t.get("tokens") or 0) for _r, t in ok), default=0
    )
    if cliff is not None and reached < cliff:
        cliff = None  # no answer got that far: there is no cliff to see
    context = diagnosis.context if diagnosis is not None else None
    found = bool(context is not None and context.detected)
    past = context.past_tokens if context is not None and found else None
    if cliff is None:
        correct = not found
    else:
        correct = past is not None and abs(bin_index(past) - bin_index(int(cliff))) <= 1
    score.sessions["context"] = SessionVerdict(
        cliff,
        found,
        None if not found or context is None else [context.below_tokens, past],
        correct,
        context.summary if context is not None and found else "",
    )

    # thermal: the main cause named for the latest answers' slowdown (none when not slow); not
    # scored where the truth knows no AL (a real server's truth by construction)
    if any(t.get("expected_al") is not None for _r, t in ok):
        truth_cause = thermal_truth([t for _r, t in ok])
        thermal = diagnosis.thermal if diagnosis is not None else None
        slow = thermal is not None and thermal.slow
        cause = thermal.cause if thermal is not None and slow else None
        share = thermal.clock_share if thermal is not None and slow else None
        score.sessions["thermal"] = SessionVerdict(
            truth_cause,
            cause is not None,
            {"cause": cause, "clock_share": _r(share)},
            cause == truth_cause,
            thermal.summary if thermal is not None and slow else "",
        )

    # canary: its status after each probe, against the state of the probe's own request
    canary_truth = [t for t in truths.values() if t.get("client_request_id") is None]
    if probes:
        bad = 0
        statuses = []
        for (_event, view_after), truth in zip(probes, canary_truth, strict=False):
            status = view_after.status if view_after is not None else None
            share_al = truth.get("al_share")
            low = share_al is not None and share_al < DRIFTED_SHARE
            statuses.append(f"{status}{'*' if low else ''}")
            if low and status == "ok":
                bad += 1
        score.sessions["canary"] = SessionVerdict(
            f"{sum(1 for t in canary_truth if (t.get('al_share') or 1) < DRIFTED_SHARE)} "
            f"of {len(canary_truth)} probes on an engine >=30% below healthy",
            True,
            " ".join(statuses),
            bad == 0,
            f"{bad} probes 'ok' on a drifted engine",
        )
    return score


# ---------------------------------------------------------------- the corpus


def load_manifest(corpus: Path) -> list[dict[str, Any]]:
    data = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    scenarios: list[dict[str, Any]] = data["scenarios"]
    return scenarios


def score_corpus(corpus: Path = CORPUS) -> list[ScenarioScore]:
    scores = []
    for entry in load_manifest(corpus):
        scores.append(
            score_scenario(
                entry["name"],
                entry["split"],
                corpus / entry["recording"],
                corpus / entry["truth"],
                entry.get("replay_baseline_tok_s"),
            )
        )
    return scores


def totals(scores: Iterable[ScenarioScore], split: str) -> dict[str, Counts]:
    out = {v: Counts() for v in REQUEST_VERDICTS}
    for s in scores:
        if split != "all" and s.split != split:
            continue
        for verdict, counts in s.requests.items():
            out[verdict] = out[verdict].merged(counts)
    return out


# ---------------------------------------------------------------- targets


def target_failures(scores: Sequence[ScenarioScore]) -> list[str]:
    """The issue's targets on the whole corpus, one line per target missed."""
    failures: list[str] = []
    t = totals(scores, "all")

    def at_least(verdict: str, what: str, value: float | None, floor: float) -> None:
        if value is not None and value < floor:
            failures.append(f"{verdict} {what} {value:.3f} < {floor}")

    vanilla = t["vanilla-speed"]
    at_least("vanilla-speed", "precision", vanilla.precision if vanilla.flagged else 0.0, 0.95)
    at_least("vanilla-speed", "recall", vanilla.recall, 0.95)
    transition = t["transition"]
    if transition.fp:
        failures.append(
            f"transition: {transition.fp} of {transition.flagged} badges not within one answer "
            "of a change of state"
        )
    loop = t["loop"]
    at_least("loop", "recall", loop.recall, 0.95)
    if loop.fp:
        failures.append(f"loop: {loop.fp} loop flags on answers that did not loop")
    at_least("garbled", "recall", t["garbled"].recall, 0.9)
    for s in scores:
        for verdict in SESSION_VERDICTS:
            v = s.sessions.get(verdict)
            if v is not None and not v.correct:
                failures.append(
                    f"{s.name}: {verdict}: truth {v.truth}, found {v.found}, value {v.value}"
                    + (f" ({v.note})" if v.note else "")
                )
    return failures


# ---------------------------------------------------------------- output


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(scores: Sequence[ScenarioScore]) -> str:
    lines = ["### Per-answer verdicts", ""]
    lines.append(
        "| verdict | split | answers | truly positive | flagged | precision | recall "
        "| false alarms / 100 |"
    )
    lines.append("|---|---|--:|--:|--:|--:|--:|--:|")
    for verdict in REQUEST_VERDICTS:
        for split in SPLITS:
            c = totals(scores, split)[verdict]
            lines.append(
                f"| {verdict} | {split} | {c.answers} | {c.positives} | {c.flagged} "
                f"| {_f(c.precision)} | {_f(c.recall)} | {_f(c.false_alarms_per_100, 1)} |"
            )
    for verdict in SESSION_VERDICTS:
        lines += ["", f"### {verdict}", ""]
        lines.append("| scenario | split | truth | found | value | right |")
        lines.append("|---|---|---|---|---|---|")
        right = {split: [0, 0] for split in SPLITS}
        for s in scores:
            v = s.sessions.get(verdict)
            if v is None:
                continue
            value = (
                v.value
                if not isinstance(v.value, dict)
                else ", ".join(f"{k} {val}" for k, val in v.value.items())
            )
            lines.append(
                f"| {s.name} | {s.split} | {v.truth} | {'yes' if v.found else 'no'} "
                f"| {value if value is not None else '—'} | {'yes' if v.correct else '**no**'} |"
            )
            for split in ("all", s.split):
                right[split][0] += int(v.correct)
                right[split][1] += 1
        lines.append("")
        lines.append(
            "Right: "
            + ", ".join(f"{split} {right[split][0]}/{right[split][1]}" for split in SPLITS)
        )
    lines += ["", "### Vanilla-speed badges: at each answer's end and at the recording's end", ""]
    lines.append("| split | at each answer's end (timeline) | at the recording's end (F4) |")
    lines.append("|---|--:|--:|")
    for split in SPLITS:
        chosen = [s for s in scores if split in ("all", s.split)]
        at_end = sum(s.flags_at_end for s in chosen)
        final = sum(s.requests["vanilla-speed"].flagged for s in chosen)
        lines.append(f"| {split} | {at_end} | {final} |")
    lines += ["", "### Targets missed", ""]
    failures = target_failures(scores)
    lines += [f"- {f}" for f in failures] if failures else ["- none"]
    return "\n".join(lines) + "\n"


def as_json(scores: Sequence[ScenarioScore]) -> dict[str, Any]:
    return {
        "requests": {
            verdict: {split: totals(scores, split)[verdict].as_dict() for split in SPLITS}
            for verdict in REQUEST_VERDICTS
        },
        "scenarios": [
            {
                "name": s.name,
                "split": s.split,
                "answers": s.answers,
                "unmatched": s.unmatched,
                "flags_at_end": s.flags_at_end,
                "requests": {v: c.as_dict() for v, c in s.requests.items()},
                "sessions": {v: asdict(sv) for v, sv in s.sessions.items()},
            }
            for s in scores
        ],
        "targets_missed": target_failures(scores),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus folder")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args(argv)
    try:
        scores = score_corpus(args.corpus)
    except (OSError, ValueError, KeyError) as err:
        print(f"verdicts: cannot score {args.corpus}: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(as_json(scores), indent=1))
    else:
        print(markdown(scores), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
