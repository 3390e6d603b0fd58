"""Writes a session recording (NDJSON, `.gz` by extension) as events arrive.

Crash-safe: lines are appended, flushed at least once a second (checked at every write and by the
hub's periodic tick), and the file is fsynced on close. Secrets are scrubbed before anything is
written, by one core.redaction.Scrubber: the literal secret values given here, the environment's
token values, the server URL's password, secrets by shape in every text that is not model text,
and the `--redact` patterns.

Model text is kept verbatim otherwise (a model that echoes a key puts it in the answer): `redact`
patterns (`--redact REGEX`) are applied to the answer's text and reasoning before they are
written, per request across chunks (core.redaction.StreamRedactor: the newest 256 characters of
an answer are held until more comes or the answer ends).
"""

from __future__ import annotations

import datetime as _dt
import gzip
import io
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO

from specmon.core.clock import Clock, monotonic_clock
from specmon.core.errors import RecordingError
from specmon.core.events import Event, RequestEnded, SessionInfo, StreamChunk
from specmon.core.recording_format import EventEncoder, RecordedBaseline, encode_header
from specmon.core.redaction import SECRET_ENV_VARS, Scrubber, StreamRedactor
from specmon.core.redaction import environment_secrets as _environment_secrets

__all__ = ["SECRET_ENV_VARS", "Recorder", "RecordingExistsError", "environment_secrets"]


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of well-known token variables and of any `*_KEY`, `*_TOKEN`, `*_SECRET`,
    `*_PASSWORD` variable (this process's environment by default)."""
    return _environment_secrets(os.environ if environ is None else environ)


class RecordingExistsError(RecordingError, FileExistsError):
    """The recording file already exists (recordings are never overwritten)."""


class Recorder:
    """A hub subscriber that appends every event to a recording file.

    Events must carry `t` in seconds since the session started (the hub's SessionClock does).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        info: SessionInfo,
        *,
        secrets: Iterable[str] = (),
        clock: Clock = monotonic_clock,
        flush_interval: float = 1.0,
        started_at: str | None = None,
        redact: Iterable[str] = (),
        urls: Iterable[str | None] = (),
        baseline: RecordedBaseline | None = None,
    ) -> None:
        """`secrets`: known values (the API key); `urls`: the session's server URLs, whose
        passwords are known values too (the header's server is one of them); `redact`: the
        `--redact` patterns (a bad one raises RedactPatternError before the file exists);
        `baseline`: the vanilla baseline in effect, written to the header."""
        self._scrubber = Scrubber.of(
            secrets, urls=(info.server, *urls), environ=os.environ, redact=redact
        )
        self._redact = self._scrubber.patterns
        self._redactors: dict[tuple[str, str], StreamRedactor] = {}
        self._last: dict[str, tuple[float, int | None]] = {}
        """Per answer being redacted: its last chunk's time and cumulative token count."""
        self.path = Path(path)
        self._clock = clock
        self._flush_interval = flush_interval
        self._encoder = EventEncoder(scrubber=self._scrubber)
        try:
            self._raw: IO[bytes] = open(self.path, "xb")  # noqa: SIM115 - kept open for the session
        except FileExistsError:
            raise RecordingExistsError(
                f"{self.path} already exists; choose another file (recordings are not overwritten)"
            ) from None
        except OSError as exc:
            raise RecordingError(f"cannot record to {self.path}: {exc.strerror or exc}") from None
        self._gz: gzip.GzipFile | None = None
        target: IO[bytes] = self._raw
        if self.path.name.endswith(".gz"):
            self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)
            target = self._gz  # type: ignore[assignment]
        self._out = io.TextIOWrapper(target, encoding="utf-8", newline="\n")
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        if started_at is None:
            started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        header = encode_header(
            info, started_at=started_at, scrubber=self._scrubber, baseline=baseline
        )
        self._out.write(self._dumps(header) + "\n")
        self.closed = False
        self._last_flush = clock()
        self.flush()

    def __call__(self, event: Event) -> None:
        self.write(event)

    def add_secret(self, secret: str) -> None:
        """Keep one more value out of the file from now on (see EventEncoder.add_secret)."""
        self._encoder.add_secret(secret)

    def write(self, event: Event) -> None:
        """Append one event line; flush when the last flush is older than the flush interval."""
        if self.closed:
            return
        if self._redact is not None:
            if isinstance(event, StreamChunk):
                event = self._redacted_chunk(event)
            elif isinstance(event, RequestEnded):
                rest = self._rest_of_answer(event)
                if rest is not None:
                    self._write_line(rest)
        self._write_line(event)

    def _write_line(self, event: Event) -> None:
        self._out.write(self._dumps(self._encoder.encode(event)) + "\n")
        now = self._clock()
        if now - self._last_flush >= self._flush_interval:
            self._flush_at(now)

    def _redactor(self, request_id: str, part: str) -> StreamRedactor:
        key = (request_id, part)
        found = self._redactors.get(key)
        if found is None:
            assert self._redact is not None
            found = self._redactors[key] = StreamRedactor(self._redact)
        return found

    def _redacted_chunk(self, chunk: StreamChunk) -> StreamChunk:
        final = chunk.finish_reason is not None  # the answer's text ends here
        rid = chunk.request_id
        text = self._redactor(rid, "text").feed(chunk.text, final=final)
        reasoning = self._redactor(rid, "reasoning").feed(chunk.reasoning, final=final)
        tokens = chunk.completion_tokens
        if tokens is None and rid in self._last:
            tokens = self._last[rid][1]
        self._last[rid] = (chunk.t, tokens)
        return replace(chunk, text=text, reasoning=reasoning)

    def _rest_of_answer(self, ended: RequestEnded) -> StreamChunk | None:
        """At a request's end: the text still held (an answer cut before its finish chunk), as
        one more chunk at the end's time that carries no new token; None when nothing is held."""
        return self._rest(ended.request_id, ended.t)

    def _rest(self, rid: str, t: float | None) -> StreamChunk | None:
        text = self._redactors.pop((rid, "text"), None)
        reasoning = self._redactors.pop((rid, "reasoning"), None)
        last_t, tokens = self._last.pop(rid, (0.0, None))
        rest_text = text.feed("", final=True) if text is not None else ""
        rest_reasoning = reasoning.feed("", final=True) if reasoning is not None else ""
        if not rest_text and not rest_reasoning:
            return None
        return StreamChunk(
            t=last_t if t is None else t,
            request_id=rid,
            text=rest_text,
            reasoning=rest_reasoning,
            completion_tokens=tokens,
        )

    def flush_if_due(self) -> None:
        """Flush when the flush interval has passed (the hub calls this on a timer)."""
        if not self.closed:
            now = self._clock()
            if now - self._last_flush >= self._flush_interval:
                self._flush_at(now)

    def flush(self) -> None:
        """Push everything written so far to the operating system (readable by another process)."""
        if not self.closed:
            self._flush_at(self._clock())

    def _flush_at(self, now: float) -> None:
        self._out.flush()
        if self._gz is not None:
            self._gz.flush()
        self._raw.flush()
        self._last_flush = now

    def close(self) -> None:
        """Flush, finish the gzip stream, fsync and close (idempotent)."""
        if getattr(self, "closed", True):
            return
        # Answers still streaming: their held text is written at their last chunk's time.
        for rid in sorted({rid for rid, _part in self._redactors}):
            rest = self._rest(rid, None)
            if rest is not None:
                self._write_line(rest)
        self.closed = True
        try:
            self._out.flush()
            self._out.detach()
            if self._gz is not None:
                self._gz.close()
            self._raw.flush()
            os.fsync(self._raw.fileno())
        finally:
            self._raw.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
