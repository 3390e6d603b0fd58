"""Fault injection: what can go wrong with one request or one /metrics scrape, and its syntax.

A fault spec is a list of items separated by `,`, `;`, `+` or spaces, e.g.
`drop-after=20`, `error=503`, `stall=2.5`, `stall=2.5@40`, `restart`, `metrics=truncated`.
It comes from the `X-Specmon-Fault` request header, the `specmon_fault` field of a JSON body,
or a schedule entry (see `schedule`). docs/simulator.md has the full table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from specmon.core.numbers import parse_int

METRICS_FAULTS = ("malformed", "truncated")
FAULT_SYNTAX = (
    "drop-after=N, error=CODE (400-599), stall=SECONDS[@TOKENS], restart, "
    "metrics=malformed|truncated"
)


class FaultError(ValueError):
    """A fault spec that cannot be parsed; the message names the valid items."""


@dataclass(frozen=True, slots=True)
class Faults:
    """The faults to apply to one request (all off by default)."""

    drop_after: int | None = None
    """Close the connection abruptly after this many completion tokens were streamed."""
    error_status: int | None = None
    """Answer with this HTTP status and a vLLM-shaped error body instead of generating."""
    stall_s: float | None = None
    """Pause the stream this many model seconds (divided by --speed)..."""
    stall_after: int = 1
    """...once this many completion tokens were sent (1 = right after the first token)."""
    restart: bool = False
    """Reset every counter before this request, as a server restart would."""
    metrics: str | None = None
    """Corrupt /metrics: on a scrape, that scrape; on a generation request, the next scrape."""

    def merged(self, other: Faults) -> Faults:
        """`self` with every fault that `other` sets laid over it."""
        changes = {}
        for name in ("drop_after", "error_status", "stall_s", "metrics"):
            value = getattr(other, name)
            if value is not None:
                changes[name] = value
        if other.stall_s is not None:
            changes["stall_after"] = other.stall_after
        if other.restart:
            changes["restart"] = True
        return replace(self, **changes)

    @property
    def any(self) -> bool:
        return self != NO_FAULTS


NO_FAULTS = Faults()

_SPLIT = re.compile(r"[,;+\s]+")


def _int(name: str, value: str, low: int, high: int | None = None) -> int:
    number = parse_int(value)
    if number is None:
        raise FaultError(f"fault {name}={value!r}: expected an integer")
    if number < low or (high is not None and number > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise FaultError(f"fault {name}={number}: must be {bound}")
    return number


def parse_faults(text: str) -> Faults:
    """Parse a fault spec (see the module docstring); FaultError on anything unknown."""
    faults = NO_FAULTS
    for item in _SPLIT.split(text.strip()):
        if not item:
            continue
        name, _, value = item.partition("=")
        name = name.strip().lower()
        if name == "restart" and not value:
            faults = replace(faults, restart=True)
        elif name == "drop-after" and value:
            faults = replace(faults, drop_after=_int(name, value, 0))
        elif name == "error" and value:
            faults = replace(faults, error_status=_int(name, value, 400, 599))
        elif name == "stall" and value:
            seconds, _, after = value.partition("@")
            try:
                stall = float(seconds)
            except ValueError:
                raise FaultError(f"fault stall={value!r}: expected SECONDS[@TOKENS]") from None
            if not stall >= 0 or stall == float("inf"):
                raise FaultError(f"fault stall={value!r}: seconds must be finite and >= 0")
            faults = replace(
                faults, stall_s=stall, stall_after=_int("stall@", after, 0) if after else 1
            )
        elif name == "metrics" and value in METRICS_FAULTS:
            faults = replace(faults, metrics=value)
        else:
            raise FaultError(f"unknown fault {item!r} (valid: {FAULT_SYNTAX})")
    return faults


def corrupt_metrics_page(page: bytes, how: str) -> bytes:
    """A /metrics page spoiled the way `how` says: `truncated` cuts it mid-line, `malformed`
    garbles sample lines (a value that is not a number, a line without a value, a broken label)."""
    if how == "truncated":
        cut = max(1, int(len(page) * 0.6))
        # end inside a line on purpose: a torn last line is what a reader must survive
        while cut < len(page) and page[cut - 1 : cut] == b"\n":
            cut += 1
        return page[:cut]
    if how == "malformed":
        lines = page.split(b"\n")
        out = []
        for i, line in enumerate(lines):
            if line.startswith(b"vllm:") and i % 3 == 0:
                name, _, _value = line.rpartition(b" ")
                out.append(name + b" not-a-number")
            elif line.startswith(b"vllm:") and i % 3 == 1:
                out.append(line.replace(b'="', b"=", 1))
            else:
                out.append(line)
        out.append(b"vllm:garbage_without_value")
        return b"\n".join(out)
    raise FaultError(f"unknown metrics fault {how!r} (valid: {', '.join(METRICS_FAULTS)})")
