"""Replays a session recording as a source: the same events, optionally at the original pace.

Reading is forgiving: every whole line is kept; a torn last line (a crash while writing) and a bad
line in the middle are reported with their line numbers (`ReadProblem`) without losing the rest;
unknown event codes and keys are ignored; a newer format version is refused with a clear message.
A gzip stream cut short (no trailer) yields everything that was flushed before the cut.

Hostile files are bounded: only regular files are read (a device or a FIFO is refused before it
is opened); a line longer than MAX_LINE_BYTES (decompressed data is taken a bounded piece at a
time) or an event time that cannot be true (core.recording_format.RecordingTimeError) stops the
reading at that line, keeping every event before it; a line nested deeper than MAX_DEPTH is
skipped like any bad line; more than MAX_SKIPPED_LINES skipped lines, or gzip data expanding
more than MAX_GZIP_RATIO times, stop the reading (docs/recording-format.md, "Limits").
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import zlib
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.errors import RecordingError
from specmon.core.events import Emit, Event, SessionInfo
from specmon.core.recording_format import (
    MAX_N_SPEC,
    EventDecoder,
    RecordingFormatError,
    RecordingTimeError,
    decode_header,
)
from specmon.core.safe_json import depth_of

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
_TOO_LONG = "\x00TOO_LONG"
"""Yielded instead of a line longer than MAX_LINE_BYTES; nothing follows it."""

MAX_LINE_BYTES = 16 << 20
"""The longest line read (16 MiB, decompressed). Recorded events are small (the sample
recordings' longest line, a first /metrics scrape, is about 4 KB); the largest real ones are a
fleet's hour of history (about 30 KB a target). A longer line stops the reading there, so a
damaged file or a gzip bomb never fills memory."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects in a line (events need about 8)."""
_CHUNK = 1 << 20
"""Decompressed data is taken in pieces of at most this many bytes."""
MAX_GZIP_RATIO = 100
"""Past GZIP_RATIO_FROM bytes of decompressed data, gzip data that expands more than this many
times is not read on (a gzip bomb): recordings compress about 5 to 10 times."""
GZIP_RATIO_FROM = 64 << 20
MAX_SKIPPED_LINES = 10_000
"""More lines skipped than this (bad, blank or comment lines; a recording has none) stop the
reading: a file of garbage lines costs bounded time and memory."""


def too_deep(raw: str) -> bool:
    """Whether the JSON text nests arrays and objects deeper than MAX_DEPTH (strings skipped)."""
    return depth_of(raw, MAX_DEPTH) > MAX_DEPTH


def _chunks(
    f: BinaryIO, gz: bool, problems: list[ReadProblem], refused: list[bool]
) -> Iterator[bytes]:
    """The file's data in pieces of at most max(_READ_SIZE, _CHUNK) bytes, decompressed when
    `gz` (taken out of the decompressor a bounded piece at a time)."""
    decomp = zlib.decompressobj(zlib.MAX_WBITS | 16) if gz else None
    read = written = 0
    while True:
        block = f.read(_READ_SIZE)
        if not block:
            return
        if decomp is None:
            yield block
            continue
        read += len(block)
        try:
            while block:
                out = decomp.decompress(block, _CHUNK)
                written += len(out)
                if written > GZIP_RATIO_FROM and written > MAX_GZIP_RATIO * read:
                    problems.append(
                        ReadProblem(
                            0,
                            f"gzip data expands more than {MAX_GZIP_RATIO} times (a gzip bomb, "
                            f"not a recording) after {written >> 20} MiB; the rest of the "
                            "recording is not read",
                        )
                    )
                    refused.append(True)
                    return
                if out:
                    yield out
                if decomp.unconsumed_tail:
                    block = decomp.unconsumed_tail
                elif decomp.eof and decomp.unused_data:
                    # A second gzip member (files concatenated): go on with a fresh stream.
                    block = decomp.unused_data
                    decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
                else:
                    block = b""
        except zlib.error as exc:
            problems.append(ReadProblem(0, f"gzip data is damaged after this point: {exc}"))
            return


def _raw_lines(path: Path, problems: list[ReadProblem]) -> Generator[str, None, None]:
    """Yield the file's lines (without the newline); a torn last line ends with _TORN; a line
    longer than MAX_LINE_BYTES is yielded as _TOO_LONG and ends the lines."""
    pending = bytearray()
    refused: list[bool] = []  # the gzip data was refused: what is pending is not a torn line
    with open(path, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise RecordingError(f"{path} is not a regular file; a recording is a file")
        for chunk in _chunks(f, path.name.endswith(".gz"), problems, refused):
            pending += chunk
            cut = pending.rfind(b"\n")
            if cut < 0:
                if len(pending) > MAX_LINE_BYTES:
                    yield _TOO_LONG
                    return
                continue
            complete = bytes(pending[:cut])
            del pending[: cut + 1]
            if len(complete) > MAX_LINE_BYTES:  # one of these lines may be over the limit
                for line in complete.split(b"\n"):
                    if len(line) > MAX_LINE_BYTES:
                        yield _TOO_LONG
                        return
                    yield line.decode("utf-8", errors="replace")
            else:
                # split on newline only: UTF-8 never has 0x0A inside a character
                yield from complete.decode("utf-8", errors="replace").split("\n")
            if len(pending) > MAX_LINE_BYTES:
                yield _TOO_LONG
                return
    if pending and not refused:
        yield pending.decode("utf-8", errors="replace") + _TORN


def _check_file(p: Path) -> None:
    """Refuse what is not a regular file before opening it (a FIFO would block the open)."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such recording") from None
    except OSError as exc:
        raise RecordingError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise RecordingError(f"{p} is a directory, not a recording")
    if not stat.S_ISREG(mode):
        raise RecordingError(
            f"{p} is not a regular file (a device, FIFO or socket); a recording is a file"
        )


def iter_recording(
    path: str | os.PathLike[str], problems: list[ReadProblem] | None = None
) -> tuple[SessionInfo, Generator[Event, None, None], dict[str, object]]:
    """Open a recording: its SessionInfo, an iterator over its events, and the raw header.

    Problems found while iterating are appended to `problems`.
    """
    p = Path(path)
    _check_file(p)
    sink: list[ReadProblem] = problems if problems is not None else []
    lines = _raw_lines(p, sink)
    try:
        first = next(lines, None)
    except OSError as exc:
        raise RecordingError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if first is None:
        raise RecordingError(f"{p} is empty: no header line")
    if first == _TOO_LONG:
        lines.close()
        raise RecordingError(
            f"{p}: line 1 (the header) is longer than {MAX_LINE_BYTES >> 20} MiB; "
            "not a specmon recording"
        )
    torn = first.endswith(_TORN)
    if torn:
        first = first[: -len(_TORN)]
    try:
        if too_deep(first):
            raise ValueError("nested too deep")
        header = json.loads(first)
    except (ValueError, RecursionError):
        lines.close()
        what = "is cut short" if torn else "is not JSON"
        raise RecordingError(f"{p}: line 1 (the header) {what}; not a specmon recording") from None
    try:
        info = decode_header(header)
    except RecordingFormatError as exc:
        lines.close()
        raise RecordingError(f"{p}: {exc}") from None
    n_spec = header.get("n_spec")
    if n_spec is not None and info.n_spec is None:
        sink.append(
            ReadProblem(
                1, f"header n_spec {n_spec!r:.40} is not an integer in 0..{MAX_N_SPEC}; ignored"
            )
        )
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
    skipped = 0
    for raw in lines:
        number += 1
        if raw == _TOO_LONG:
            problems.append(
                ReadProblem(
                    number,
                    f"longer than {MAX_LINE_BYTES >> 20} MiB; the rest of the recording "
                    "is not read",
                )
            )
            return
        try:
            if too_deep(raw):
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
            value, end = raw_decode(raw)
            if end != len(raw) and raw[end:].strip():
                raise ValueError(f"extra data after the JSON value at column {end + 1}")
            event = decode(value)
        except RecordingTimeError as exc:
            problems.append(ReadProblem(number, f"{exc}; the rest of the recording is not read"))
            return
        except (ValueError, RecursionError) as exc:
            # JSONDecodeError and RecordingFormatError are ValueErrors
            if raw.endswith(_TORN):
                problems.append(
                    ReadProblem(number, "torn last line (the recording was cut while writing)")
                )
                return
            skipped += 1
            if skipped > MAX_SKIPPED_LINES:
                problems.append(
                    ReadProblem(
                        number,
                        f"more than {MAX_SKIPPED_LINES} lines skipped (bad, blank or comment "
                        "lines); the rest of the recording is not read",
                    )
                )
                return
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue  # blank and comment lines are allowed
            if isinstance(exc, RecursionError):
                exc = ValueError("nested too deep")
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
