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
import copy
import json
import os
import stat
import zlib
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.errors import RecordingError
from specmon.core.events import Emit, Event, SessionInfo
from specmon.core.recording_format import (
    MAX_N_SPEC,
    EventDecoder,
    RecordedBaseline,
    RecordingFormatError,
    RecordingTimeError,
    decode_header,
    header_baseline,
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
    baseline: RecordedBaseline | None = None
    """The vanilla baseline the header says the session was judged against (None: none, or
    an unusable one, reported in `problems`)."""


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
_CHUNK = 1 << 18
"""Decompressed data is taken in pieces of at most this many bytes (256 KiB: a `ReadMark` holds
at most one piece's lines not yet read)."""
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


@dataclass(frozen=True, slots=True, eq=False)
class ReadMark:
    """Where a reading stands between two events (`RecordingReader.mark`): the file offset read
    up to, the decompressor's state and the input it has not used yet, the lines read but not yet
    decoded, the line number, the count of skipped lines and the event decoder's state (a
    /metrics scrape is stored as the change from the one before it). At most about 300 KiB; the
    replay screen keeps a few to read on from there after a seek."""

    offset: int
    decomp: Any
    """A copy of the zlib decompressor (None for a file that is not gzip)."""
    block: bytes
    lines: tuple[str, ...]
    pending: bytes
    stopped: bool
    refused: bool
    read: int
    written: int
    number: int
    skipped: int
    done: bool
    decoder: EventDecoder


class RecordingReader:
    """A recording's events read one at a time from a file kept open, with `mark()` (where the
    reading is, between two events) and `restart(mark)` (read on from there, or from the first
    event): the replay screen folds a long recording once and reads parts of it again after a
    seek, never holding its events in memory.

    Opening reads and checks the header (RecordingError, one line, when the file is not a
    recording); `info` and `header` hold it. Problems are appended to `problems` (the caller's
    list when given) during the first reading; problems found again after a `restart` are not
    reported twice. Iterating yields the events; close() closes the file.
    """

    def __init__(
        self, path: str | os.PathLike[str], problems: list[ReadProblem] | None = None
    ) -> None:
        p = Path(path)
        _check_file(p)
        self.path = p
        self.problems: list[ReadProblem] = problems if problems is not None else []
        self.baseline: RecordedBaseline | None = None
        """The header's vanilla baseline (`header_baseline`), once the header is read."""
        try:
            self._f: BinaryIO = open(p, "rb")  # noqa: SIM115 - kept open for the reader's life
        except OSError as exc:
            raise RecordingError(f"{p}: cannot read: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(self._f.fileno()).st_mode):
                raise RecordingError(f"{p} is not a regular file; a recording is a file")
            self._gz = p.name.endswith(".gz")
            self._decomp: Any = zlib.decompressobj(zlib.MAX_WBITS | 16) if self._gz else None
            self._block = b""
            self._lines: list[str] = []
            self._li = 0
            self._pending = bytearray()
            self._stopped = False
            self._refused = False  # the gzip data was refused: what is pending is not torn
            self._read = self._written = 0
            self._number = 1
            self._skipped = 0
            self._done = False
            self._decoder = EventDecoder()
            self.header, self.info = self._read_header()
            self._events = self._iter_events()
            self.start = self.mark()
            """Where the events begin (just after the header)."""
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._f.close()

    def __iter__(self) -> RecordingReader:
        return self

    def __next__(self) -> Event:
        return next(self._events)

    # ------------------------------------------------------------ marks

    def mark(self) -> ReadMark:
        """Where the reading is: after the last event yielded (or the header)."""
        return ReadMark(
            offset=self._f.tell(),
            decomp=None if self._decomp is None else self._decomp.copy(),
            block=bytes(self._block),
            lines=tuple(self._lines[self._li :]),
            pending=bytes(self._pending),
            stopped=self._stopped,
            refused=self._refused,
            read=self._read,
            written=self._written,
            number=self._number,
            skipped=self._skipped,
            done=self._done,
            decoder=copy.deepcopy(self._decoder),
        )

    def restart(self, mark: ReadMark | None = None) -> None:
        """Read on from `mark` (None: from the first event). The mark stays usable."""
        m = self.start if mark is None else mark
        self._events.close()
        self._f.seek(m.offset)
        self._decomp = None if m.decomp is None else m.decomp.copy()
        self._block = m.block
        self._lines = list(m.lines)
        self._li = 0
        self._pending = bytearray(m.pending)
        self._stopped, self._refused = m.stopped, m.refused
        self._read, self._written = m.read, m.written
        self._number, self._skipped, self._done = m.number, m.skipped, m.done
        self._decoder = copy.deepcopy(m.decoder)
        self.problems = []  # reported by the first reading already
        self._events = self._iter_events()

    # ------------------------------------------------------------ reading

    def _chunk(self) -> bytes | None:
        """The next piece of the file's data (decompressed when gzip, at most _CHUNK bytes at a
        time); None at its end, or where damaged or refused gzip data stops the reading."""
        f = self._f
        while True:
            block = self._block
            if not block:
                block = f.read(_READ_SIZE)
                if not block:
                    return None
                if self._decomp is None:
                    return block
                self._read += len(block)
            decomp = self._decomp
            try:
                out: bytes = decomp.decompress(block, _CHUNK)
            except zlib.error as exc:
                self.problems.append(
                    ReadProblem(0, f"gzip data is damaged after this point: {exc}")
                )
                self._block = b""
                return None
            self._written += len(out)
            written, read = self._written, self._read
            if written > GZIP_RATIO_FROM and written > MAX_GZIP_RATIO * read:
                self.problems.append(
                    ReadProblem(
                        0,
                        f"gzip data expands more than {MAX_GZIP_RATIO} times (a gzip bomb, "
                        f"not a recording) after {written >> 20} MiB; the rest of the "
                        "recording is not read",
                    )
                )
                self._refused = True
                return None
            if decomp.unconsumed_tail:
                self._block = decomp.unconsumed_tail
            elif decomp.eof and decomp.unused_data:
                # A second gzip member (files concatenated): go on with a fresh stream.
                self._block = decomp.unused_data
                self._decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
            else:
                self._block = b""
            if out:
                return out

    def _fill(self) -> bool:
        """Read the next whole lines (without their newlines) into `_lines`; False at the end.
        A torn last line ends with _TORN; a line longer than MAX_LINE_BYTES is _TOO_LONG and
        ends the lines."""
        pending = self._pending
        while not self._stopped:
            chunk = self._chunk()
            if chunk is None:
                self._stopped = True
                if pending and not self._refused:
                    self._lines = [pending.decode("utf-8", errors="replace") + _TORN]
                    self._li = 0
                    del pending[:]
                    return True
                return False
            pending += chunk
            cut = pending.rfind(b"\n")
            if cut < 0:
                if len(pending) > MAX_LINE_BYTES:
                    self._lines, self._li, self._stopped = [_TOO_LONG], 0, True
                    return True
                continue
            complete = bytes(pending[:cut])
            del pending[: cut + 1]
            lines: list[str] = []
            if len(complete) > MAX_LINE_BYTES:  # one of these lines may be over the limit
                for line in complete.split(b"\n"):
                    if len(line) > MAX_LINE_BYTES:
                        lines.append(_TOO_LONG)
                        self._stopped = True
                        break
                    lines.append(line.decode("utf-8", errors="replace"))
            else:
                # split on newline only: UTF-8 never has 0x0A inside a character
                lines = complete.decode("utf-8", errors="replace").split("\n")
            if not self._stopped and len(pending) > MAX_LINE_BYTES:
                lines.append(_TOO_LONG)
                self._stopped = True
            self._lines, self._li = lines, 0
            return True
        return False

    def _next_line(self) -> str | None:
        if self._li >= len(self._lines) and not self._fill():
            return None
        line = self._lines[self._li]
        self._li += 1
        return line

    def _read_header(self) -> tuple[dict[str, Any], SessionInfo]:
        p = self.path
        try:
            first = self._next_line()
        except OSError as exc:
            raise RecordingError(f"{p}: cannot read: {exc.strerror or exc}") from None
        if first is None:
            raise RecordingError(f"{p} is empty: no header line")
        if first == _TOO_LONG:
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
            what = "is cut short" if torn else "is not JSON"
            raise RecordingError(
                f"{p}: line 1 (the header) {what}; not a specmon recording"
            ) from None
        try:
            info = decode_header(header)
        except RecordingFormatError as exc:
            raise RecordingError(f"{p}: {exc}") from None
        n_spec = header.get("n_spec")
        if n_spec is not None and info.n_spec is None:
            self.problems.append(
                ReadProblem(
                    1,
                    f"header n_spec {n_spec!r:.40} is not an integer in 0..{MAX_N_SPEC}; ignored",
                )
            )
        self.baseline, notice = header_baseline(header)
        if notice is not None:
            self.problems.append(ReadProblem(1, notice))
        return header, info

    def _iter_events(self) -> Generator[Event, None, None]:
        """The events from where the reading is; the state a mark needs is stored before each
        event is yielded."""
        decode = self._decoder.decode
        raw_decode = json.JSONDecoder().raw_decode
        number = self._number
        skipped = self._skipped
        if self._done:
            return
        while True:
            lines, li = self._lines, self._li
            while li < len(lines):
                raw = lines[li]
                li += 1
                number += 1
                if raw == _TOO_LONG:
                    self._stop(
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
                    self._stop(ReadProblem(number, f"{exc}; the rest of the recording is not read"))
                    return
                except (ValueError, RecursionError) as exc:
                    # JSONDecodeError and RecordingFormatError are ValueErrors
                    if raw.endswith(_TORN):
                        self._stop(
                            ReadProblem(
                                number, "torn last line (the recording was cut while writing)"
                            )
                        )
                        return
                    skipped += 1
                    if skipped > MAX_SKIPPED_LINES:
                        self._stop(
                            ReadProblem(
                                number,
                                f"more than {MAX_SKIPPED_LINES} lines skipped (bad, blank or "
                                "comment lines); the rest of the recording is not read",
                            )
                        )
                        return
                    if not raw.strip() or raw.lstrip().startswith("#"):
                        continue  # blank and comment lines are allowed
                    if isinstance(exc, RecursionError):
                        exc = ValueError("nested too deep")
                    self.problems.append(ReadProblem(number, f"skipped: {exc}"))
                    continue
                if event is not None:
                    self._li, self._number, self._skipped = li, number, skipped
                    yield event
            self._li, self._number, self._skipped = li, number, skipped
            if not self._fill():
                self._done = True
                return

    def _stop(self, problem: ReadProblem) -> None:
        self.problems.append(problem)
        self._done = True


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

    Problems found while iterating are appended to `problems`. The file is closed when the
    iterator ends or is closed.
    """
    reader = RecordingReader(path, problems)
    return reader.info, _closing(reader), reader.header


def _closing(reader: RecordingReader) -> Generator[Event, None, None]:
    try:
        yield from reader._events  # the generator itself: one layer less per event
    finally:
        reader.close()  # closes the file now, not whenever the reader is collected


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
        baseline=header_baseline(header)[0],
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
        self._reader = RecordingReader(path, self.problems)
        self.info = self._reader.info
        self.baseline = self._reader.baseline
        self._speed = speed
        self._clock = clock
        self._sleep = sleep
        self.emitted = 0

    def close(self) -> None:
        """Close the recording file (a run that ended, was cancelled or never started)."""
        self._reader.close()

    async def run(self, emit: Emit) -> int:
        """Emit every event (paced when a speed was given); returns how many were emitted."""
        try:
            return await self._run(emit)
        finally:
            self.close()

    async def _run(self, emit: Emit) -> int:
        start_wall = 0.0
        start_t: float | None = None
        for event in self._reader:
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
