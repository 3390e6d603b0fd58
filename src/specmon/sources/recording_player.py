"""Replays a session recording as a source: the same events, optionally at the original pace.

Reading is forgiving: every whole line is kept; a torn last line (a crash while writing) and a bad
line in the middle are reported with their line numbers (`ReadProblem`) without losing the rest;
unknown event codes and keys are ignored; a newer format version is refused with a clear message.
A gzip stream cut short (no trailer) yields everything that was flushed before the cut.
"""

from __future__ import annotations

import asyncio
import json
import os
import zlib
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.errors import RecordingError
from specmon.core.events import Emit, Event, SessionInfo
from specmon.core.recording_format import EventDecoder, RecordingFormatError, decode_header

Sleep = Callable[[float], Awaitable[None]]

_READ_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """A line that was skipped, with its 1-based line number and why."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class Recording:
    """A whole recording read into memory."""

    info: SessionInfo
    events: list[Event]
    problems: list[ReadProblem] = field(default_factory=list)
    started_at: str | None = None


_TORN = "\x00TORN"


def _raw_lines(path: Path, problems: list[ReadProblem]) -> Iterator[str]:
    """Yield the file's lines (without the newline); a torn last line ends with _TORN."""
    gz = path.name.endswith(".gz")
    decomp = zlib.decompressobj(zlib.MAX_WBITS | 16) if gz else None
    pending = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_READ_SIZE)
            if not block:
                break
            if decomp is not None:
                try:
                    block = decomp.decompress(block)
                    if decomp.eof and decomp.unused_data:
                        # A second gzip member (files concatenated): go on with a fresh stream.
                        rest = decomp.unused_data
                        decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
                        block += decomp.decompress(rest)
                except zlib.error as exc:
                    problems.append(ReadProblem(0, f"gzip data is damaged after this point: {exc}"))
                    break
            pending += block
            complete, newline, pending = pending.rpartition(b"\n")
            if newline:
                # split on newline bytes only: UTF-8 never has 0x0A inside a character
                yield from complete.decode("utf-8", errors="replace").split("\n")
    if pending:
        yield pending.decode("utf-8", errors="replace") + _TORN


def iter_recording(
    path: str | os.PathLike[str], problems: list[ReadProblem] | None = None
) -> tuple[SessionInfo, Generator[Event, None, None], dict[str, object]]:
    """Open a recording: its SessionInfo, an iterator over its events, and the raw header.

    Problems found while iterating are appended to `problems`.
    """
    p = Path(path)
    if not p.exists():
        raise RecordingError(f"{p}: no such recording")
    if p.is_dir():
        raise RecordingError(f"{p} is a directory, not a recording")
    sink: list[ReadProblem] = problems if problems is not None else []
    lines = _raw_lines(p, sink)
    try:
        first = next(lines, None)
    except OSError as exc:
        raise RecordingError(f"{p}: cannot read: {exc}") from None
    if first is None:
        raise RecordingError(f"{p} is empty: no header line")
    torn = first.endswith(_TORN)
    if torn:
        first = first[: -len(_TORN)]
    try:
        header = json.loads(first)
    except ValueError:
        what = "is cut short" if torn else "is not JSON"
        raise RecordingError(f"{p}: line 1 (the header) {what}; not a specmon recording") from None
    try:
        info = decode_header(header)
    except RecordingFormatError as exc:
        raise RecordingError(f"{p}: {exc}") from None
    return info, _events(lines, sink), header


def _events(lines: Iterator[str], problems: list[ReadProblem]) -> Generator[Event, None, None]:
    try:
        yield from _decoded(lines, problems)
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()  # closes the file now, not whenever the reader is collected


def _decoded(lines: Iterator[str], problems: list[ReadProblem]) -> Iterator[Event]:
    decode = EventDecoder().decode
    raw_decode = json.JSONDecoder().raw_decode
    number = 1
    for raw in lines:
        number += 1
        try:
            value, end = raw_decode(raw)
            if end != len(raw) and raw[end:].strip():
                raise ValueError(f"extra data after the JSON value at column {end + 1}")
            event = decode(value)
        except ValueError as exc:  # JSONDecodeError and RecordingFormatError are ValueErrors
            if raw.endswith(_TORN):
                problems.append(
                    ReadProblem(number, "torn last line (the recording was cut while writing)")
                )
                return
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue  # blank and comment lines are allowed
            problems.append(ReadProblem(number, f"skipped: {exc}"))
            continue
        if event is not None:
            yield event


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a whole recording (header, events, problems)."""
    problems: list[ReadProblem] = []
    info, events, header = iter_recording(path, problems)
    started = header.get("started_at")
    return Recording(
        info=info,
        events=list(events),
        problems=problems,
        started_at=started if isinstance(started, str) else None,
    )


class RecordingPlayer:
    """A source that emits a recording's events.

    With `speed=None` events are emitted as fast as possible; otherwise the original gaps are kept,
    divided by `speed`, measured on `clock` and waited with `sleep` (injectable for tests).
    The file stays open from construction until the run ends (or `close()`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        speed: float | None = None,
        clock: Clock = monotonic_clock,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"replay speed must be positive, got {speed}")
        self.problems: list[ReadProblem] = []
        self.info, self._events, _ = iter_recording(path, self.problems)
        self._speed = speed
        self._clock = clock
        self._sleep = sleep
        self.emitted = 0

    def close(self) -> None:
        """Close the recording file (a run that ended, was cancelled or never started)."""
        self._events.close()

    async def run(self, emit: Emit) -> int:
        """Emit every event (paced when a speed was given); returns how many were emitted."""
        try:
            return await self._run(emit)
        finally:
            self.close()

    async def _run(self, emit: Emit) -> int:
        start_wall = 0.0
        start_t: float | None = None
        for event in self._events:
            if self._speed is not None:
                if start_t is None:
                    start_t = event.t
                    start_wall = self._clock()
                due = (event.t - start_t) / self._speed
                elapsed = self._clock() - start_wall
                if due > elapsed:
                    await self._sleep(due - elapsed)
            else:
                # Let other tasks (the UI reader, a stop request) run now and then.
                if self.emitted % 512 == 511:
                    await asyncio.sleep(0)
            emit(event)
            self.emitted += 1
        return self.emitted
