"""Degradation schedules: which phase (and which faults) each generation request gets.

Requests are numbered in arrival order (the first is request 1). Forms:
- `cycle:5f,1t,3d,1r` — repeat the list forever; an item is `[COUNT]PHASE[+FAULT...]`, PHASE one
  of f (fast), t (transition), d (degraded), r (recovery); e.g. `cycle:9f,1f+drop-after=20`.
- `drop-at:N` — requests before N fast, request N and every later one degraded.
- `file:PATH` (or a path to an existing `.json`/`.txt` file): JSON `{"mode": "cycle"|"hold",
  "requests": ["f", "d drop-after=20", {"phase": "t", "faults": "error=503"}]}` (a bare list
  means cycle), or text with one `PHASE [FAULTS]` per line, `#` comments and an optional
  `mode: hold` line. In `hold` mode the last entry repeats once the list is used up.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specmon.sim.faults import NO_FAULTS, FaultError, Faults, parse_faults
from specmon.sim.step_model import PHASES

SCHEDULE_SYNTAX = (
    "cycle:COUNTPHASE,... (phases f,t,d,r; e.g. cycle:5f,1t,3d,1r), drop-at:N, "
    "or file:PATH (.json or .txt)"
)


class ScheduleError(ValueError):
    """A schedule that cannot be parsed; the message names the valid forms."""


@dataclass(frozen=True, slots=True)
class Entry:
    phase: str
    faults: Faults = NO_FAULTS


@dataclass(frozen=True, slots=True)
class Schedule:
    """A list of entries, cycled (`repeat`) or held at the last entry."""

    entries: tuple[Entry, ...]
    repeat: bool = True
    source: str = ""

    def entry_for(self, request_number: int) -> Entry:
        """The entry of request `request_number` (1-based, arrival order)."""
        index = max(0, request_number - 1)
        if self.repeat:
            return self.entries[index % len(self.entries)]
        return self.entries[min(index, len(self.entries) - 1)]


_ITEM = re.compile(r"^(\d*)([a-z])$")


def _entry(phase: str, faults: str, where: str) -> Entry:
    if phase not in PHASES:
        raise ScheduleError(
            f"{where}: unknown phase {phase!r} (phases: "
            + ", ".join(f"{k}={v}" for k, v in PHASES.items())
            + ")"
        )
    try:
        return Entry(phase, parse_faults(faults) if faults else NO_FAULTS)
    except FaultError as err:
        raise ScheduleError(f"{where}: {err}") from None


def _parse_cycle(body: str, spec: str) -> Schedule:
    entries: list[Entry] = []
    for raw in body.split(","):
        item = raw.strip()
        head, _, faults = item.partition("+")
        match = _ITEM.match(head.strip())
        if not match:
            raise ScheduleError(
                f"bad schedule item {item!r} in {spec!r} (valid: {SCHEDULE_SYNTAX})"
            )
        count = int(match.group(1)) if match.group(1) else 1
        if count < 1 or count > 100_000:
            raise ScheduleError(f"bad count in schedule item {item!r}: must be 1..100000")
        entries.extend([_entry(match.group(2), faults, f"schedule item {item!r}")] * count)
    if not entries:
        raise ScheduleError(f"empty schedule {spec!r} (valid: {SCHEDULE_SYNTAX})")
    return Schedule(tuple(entries), repeat=True, source=spec)


def _parse_json(data: Any, where: str) -> Schedule:
    repeat = True
    if isinstance(data, dict):
        mode = data.get("mode", "cycle")
        if mode not in ("cycle", "hold"):
            raise ScheduleError(f"{where}: mode must be 'cycle' or 'hold', got {mode!r}")
        repeat = mode == "cycle"
        data = data.get("requests")
    if not isinstance(data, list) or not data:
        raise ScheduleError(f"{where}: expected a non-empty list of requests")
    entries = []
    for i, item in enumerate(data, 1):
        if isinstance(item, str):
            phase, _, faults = item.strip().partition(" ")
            entries.append(_entry(phase, faults.strip(), f"{where} request {i}"))
        elif isinstance(item, dict) and isinstance(item.get("phase"), str):
            faults = item.get("faults", "")
            if not isinstance(faults, str):
                raise ScheduleError(f"{where} request {i}: faults must be a string")
            entries.append(_entry(item["phase"], faults, f"{where} request {i}"))
        else:
            raise ScheduleError(f"{where} request {i}: expected 'PHASE [FAULTS]' or an object")
    return Schedule(tuple(entries), repeat=repeat, source=where)


def _parse_text(text: str, where: str) -> Schedule:
    entries = []
    repeat = True
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.lower().startswith("mode:"):
            mode = line.split(":", 1)[1].strip()
            if mode not in ("cycle", "hold"):
                raise ScheduleError(f"{where} line {number}: mode must be cycle or hold")
            repeat = mode == "cycle"
            continue
        phase, _, faults = line.partition(" ")
        entries.append(_entry(phase, faults.strip(), f"{where} line {number}"))
    if not entries:
        raise ScheduleError(f"{where}: no requests in the schedule file")
    return Schedule(tuple(entries), repeat=repeat, source=where)


def parse_schedule_text(text: str, where: str) -> Schedule:
    """Parse a schedule file's content (JSON if it parses as JSON, else the line format)."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise ScheduleError(f"{where}: invalid JSON ({err.msg}, line {err.lineno})") from None
        return _parse_json(data, where)
    return _parse_text(text, where)


def parse_schedule(spec: str) -> Schedule:
    """Parse a `--schedule` value; ScheduleError (one line, naming the valid forms) if bad."""
    spec = spec.strip()
    kind, sep, body = spec.partition(":")
    if sep and kind == "cycle":
        return _parse_cycle(body, spec)
    if sep and kind == "drop-at":
        try:
            n = int(body)
        except ValueError:
            n = 0
        if not 1 <= n <= 100_000:  # the entries are built out: keep them to cycle's bound
            raise ScheduleError(f"drop-at needs a request number 1..100000, got {body!r}")
        entries = (Entry("f"),) * (n - 1) + (Entry("d"),)
        return Schedule(entries, repeat=False, source=spec)
    path_text = body if (sep and kind == "file") else spec
    path = Path(path_text)
    if (sep and kind == "file") or path.suffix in (".json", ".txt"):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise ScheduleError(f"cannot read schedule file {path_text!r}: {reason}") from None
        return parse_schedule_text(text, path.name)
    raise ScheduleError(f"malformed schedule {spec!r} (valid: {SCHEDULE_SYNTAX})")
