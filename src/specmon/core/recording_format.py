"""The session recording format: pure encoding and decoding of header and event lines.

A recording is NDJSON (docs/recording-format.md). Line 1 is a header object
`{"format": "specmon-session", "version": 1, ...SessionInfo fields}`; every other line is an event
`[t, "code", {data}]` with `t` in seconds since the session started. This module turns events into
JSON-ready values and back, one encoder and one decoder per event type in two tables that must
cover every event type (core.dispatch). Files, gzip, flushing and pacing live in
runtime/recorder.py and sources/recording_player.py; secret scrubbing in core/redaction.py; the
/metrics delta encoding in core/metrics_delta.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any

from specmon.core.dispatch import event_table
from specmon.core.errors import RecordingFormatError
from specmon.core.events import (
    CanaryProbed,
    Event,
    FleetSampled,
    GpuReading,
    GpuSampled,
    Marker,
    MetricsScraped,
    RequestEnded,
    RequestOutcome,
    RequestStarted,
    ServerLogLine,
    ServerStatus,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)
from specmon.core.fleet_codec import decode_fleet, encode_fleet
from specmon.core.metrics_delta import MetricsDeltaDecoder, MetricsDeltaEncoder, number
from specmon.core.redaction import REDACTED, Scrubber, redact_text, redact_url
from specmon.core.server_timing import TIMING_FIELDS

__all__ = [
    "CODES",
    "FORMAT",
    "REDACTED",
    "VERSION",
    "EventDecoder",
    "EventEncoder",
    "RecordedBaseline",
    "RecordingFormatError",
    "RecordingTimeError",
    "decode_header",
    "encode_header",
    "header_baseline",
    "redact_text",
    "redact_url",
]

FORMAT = "specmon-session"
VERSION = 1

MAX_BACKWARD_S = 600.0
"""How far an event's time may go back from the latest time before it (a log line or a marker
queued, then stamped; the recorder writes in arrival order, so real recordings go back far less)."""
MAX_JUMP_S = 7 * 86_400.0
"""The largest forward jump of event time allowed from one line to the next (and from 0 to the
first event): a session's monotonic clock does not run for a week between two events."""


MAX_N_SPEC = 256
"""The largest n_spec a header may give (vLLM drafts a few to a few tens of tokens a step);
another value is read as unknown (None) and the reader names it."""
MAX_INT = 2**53
"""Integers of events (token counts, characters, GPU index) are within ±MAX_INT: exact as
floats, so the numbers computed from them never overflow."""


class RecordingTimeError(RecordingFormatError):
    """An event time that cannot be true (not finite, far back, an absurd jump): everything after
    it is untrustworthy, so a reader stops at that line (keeping every event before it)."""


# Event codes (documented in docs/recording-format.md). Short: chunks are most of a recording.
CODE_REQUEST_STARTED = "rs"
CODE_CHUNK = "c"
CODE_REQUEST_ENDED = "re"
CODE_METRICS = "ms"
CODE_SERVER_STATUS = "ss"
CODE_LOG = "l"
CODE_GPU = "g"
CODE_MARKER = "m"
CODE_FLEET = "fl"
CODE_CANARY = "cn"

CODES: dict[type, str] = {
    RequestStarted: CODE_REQUEST_STARTED,
    StreamChunk: CODE_CHUNK,
    RequestEnded: CODE_REQUEST_ENDED,
    MetricsScraped: CODE_METRICS,
    ServerStatusChanged: CODE_SERVER_STATUS,
    ServerLogLine: CODE_LOG,
    GpuSampled: CODE_GPU,
    Marker: CODE_MARKER,
    FleetSampled: CODE_FLEET,
    CanaryProbed: CODE_CANARY,
}
"""The code of each event type (every event type has one: tests/unit/test_dispatch.py)."""


# ---------------------------------------------------------------- header

_INFO_FIELDS = tuple(f.name for f in fields(SessionInfo))


MAX_BASELINE_TOK_S = 1e7
"""The largest vanilla baseline a header may give (the bound `--baseline` accepts)."""
BASELINE_SOURCES = ("given", "stored")
"""Where a recorded baseline came from: `--baseline`, or the baseline store."""


@dataclass(frozen=True, slots=True)
class RecordedBaseline:
    """The vanilla baseline a session's vanilla-speed flag was judged against, and where it came
    from (`BASELINE_SOURCES`; None when a header named none this specmon knows)."""

    tok_s: float
    source: str | None = None


def header_baseline(header: dict[str, Any]) -> tuple[RecordedBaseline | None, str | None]:
    """The header's `baseline_tok_s` (and `baseline_from`), and a notice when it is present but
    unusable: not a finite number in (0, MAX_BASELINE_TOK_S]; the notice names the field. Absent
    (an older recording, or none was in effect): (None, None)."""
    if "baseline_tok_s" not in header or header["baseline_tok_s"] is None:
        return None, None
    value = header["baseline_tok_s"]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_BASELINE_TOK_S
    ):
        return None, (
            f"header baseline_tok_s {value!r:.40} is not a number in "
            f"(0, {MAX_BASELINE_TOK_S:g}] tok/s; ignored"
        )
    source = header.get("baseline_from")
    return RecordedBaseline(float(value), source if source in BASELINE_SOURCES else None), None


def encode_header(
    info: SessionInfo,
    *,
    started_at: str | None = None,
    secrets: Iterable[str] = (),
    scrubber: Scrubber | None = None,
    baseline: RecordedBaseline | None = None,
) -> dict[str, Any]:
    """The header object (line 1) for a session: format, version, and every SessionInfo field,
    scrubbed (`scrubber`, else one for the known `secrets` and the server URL's password); then
    the vanilla `baseline` in effect, if any (`baseline_tok_s`, `baseline_from`)."""
    if scrubber is None:
        scrubber = Scrubber.of(secrets, urls=[info.server])
    header: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if started_at is not None:
        header["started_at"] = started_at
    for name in _INFO_FIELDS:
        value = getattr(info, name)
        header[name] = scrubber.url(value) if name == "server" else scrubber.value(value)
    if baseline is not None:
        header["baseline_tok_s"] = baseline.tok_s
        if baseline.source is not None:
            header["baseline_from"] = baseline.source
    return header


def decode_header(value: Any) -> SessionInfo:
    """SessionInfo from a header object; refuses other formats and newer versions clearly.

    Unknown header keys are ignored (asciicast v3's rule), so newer writers stay readable.
    """
    if not isinstance(value, dict):
        raise RecordingFormatError(
            f"line 1 is not a specmon header object (found {type(value).__name__})"
        )
    if value.get("format") != FORMAT:
        raise RecordingFormatError(
            f"not a specmon recording: line 1 has format {value.get('format')!r}, "
            f"expected {FORMAT!r}"
        )
    version = value.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordingFormatError(f"header version {version!r} is not an integer")
    if version > VERSION:
        raise RecordingFormatError(
            f"recording format version {version} is newer than this specmon reads "
            f"(version {VERSION}); upgrade specmon to replay it"
        )
    if version < 1:
        raise RecordingFormatError(f"header version {version} is not a valid version")
    kwargs: dict[str, Any] = {}
    for name in _INFO_FIELDS:
        if name in value:
            kwargs[name] = value[name]
    extra = kwargs.get("extra")
    if extra is not None and not isinstance(extra, dict):
        kwargs.pop("extra")
    kwargs["simulated"] = bool(kwargs.get("simulated", False))
    n_spec = kwargs.get("n_spec")
    if n_spec is not None and not valid_n_spec(n_spec):
        kwargs["n_spec"] = None
    for name in ("server", "model", "draft_model", "method", "vllm_version", "gpu"):
        if name in kwargs and kwargs[name] is not None and not isinstance(kwargs[name], str):
            kwargs[name] = str(kwargs[name])
    return SessionInfo(**kwargs)


def valid_n_spec(value: Any) -> bool:
    """Whether a header's n_spec is an integer in 0..MAX_N_SPEC."""
    return type(value) is int and 0 <= value <= MAX_N_SPEC


# ---------------------------------------------------------------- events → values

_GPU_FIELDS = tuple(f.name for f in fields(GpuReading) if f.name != "index")


def _gpu_dict(g: GpuReading) -> dict[str, Any]:
    out: dict[str, Any] = {"index": g.index}
    for name in _GPU_FIELDS:
        value = getattr(g, name)
        if value is not None:
            out[name] = list(value) if name == "clock_event_reasons" else value
    return out


class EventEncoder:
    """Turns events into `[t, code, data]` values (stateful only for /metrics deltas).

    Every text goes through `scrubber` (core.redaction.Scrubber; else one for the literal
    `secrets`): known values from every text field; log lines, error texts, status details and
    labels also by shape and by the `--redact` patterns; URLs lose their `user:password@`.
    Model text gets known values only here: the recorder applies `--redact` to it as it streams.
    """

    def __init__(self, secrets: Iterable[str] = (), *, scrubber: Scrubber | None = None) -> None:
        self._metrics = MetricsDeltaEncoder()
        self._scrub = scrubber if scrubber is not None else Scrubber.of(secrets)
        self._encoders: dict[type, Callable[[Any], dict[str, Any]]] = event_table(
            {
                StreamChunk: self._chunk,
                MetricsScraped: self._metrics.encode,
                GpuSampled: self._gpu,
                RequestStarted: self._started,
                RequestEnded: self._ended,
                ServerStatusChanged: self._status,
                ServerLogLine: self._log,
                Marker: self._marker,
                FleetSampled: self._fleet,
                CanaryProbed: self._canary,
            },
            name="recording encoder",
        )

    def add_secret(self, secret: str) -> None:
        """Scrub one more literal value from what is encoded from now on (a key typed for a server
        added while the session runs)."""
        self._scrub = self._scrub.adding(secret)

    def _text(self, text: str) -> str:
        return self._scrub.text(text)

    def _plain(self, text: str) -> str:
        # Model text is data: only literal known secrets are removed, never by shape.
        return self._scrub.literal(text)

    def _url(self, url: str) -> str:
        return self._scrub.url(url) or ""

    def encode(self, event: Event) -> list[Any]:
        kind = type(event)
        encoder = self._encoders.get(kind)
        if encoder is None:
            raise TypeError(f"not a specmon event: {kind.__name__}")
        return [event.t, CODES[kind], encoder(event)]

    def _chunk(self, event: StreamChunk) -> dict[str, Any]:
        data: dict[str, Any] = {"id": event.request_id}
        if event.text:
            data["x"] = self._plain(event.text)
        if event.reasoning:
            data["rz"] = self._plain(event.reasoning)
        if event.role is not None:
            data["role"] = event.role
        if event.completion_tokens is not None:
            data["n"] = event.completion_tokens
        if event.prompt_tokens is not None:
            data["p"] = event.prompt_tokens
        if event.finish_reason is not None:
            data["fr"] = event.finish_reason
        return data

    def _gpu(self, event: GpuSampled) -> dict[str, Any]:
        data: dict[str, Any] = {
            "src": self._url(event.source),
            "gpus": [_gpu_dict(g) for g in event.gpus],
        }
        if event.error is not None:
            data["error"] = self._text(event.error)
        return data

    def _started(self, event: RequestStarted) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": event.request_id,
            "src": self._url(event.source),
            "model": event.model,
            "prompt_chars": event.prompt_chars,
        }
        for name in ("max_tokens", "temperature", "top_p"):
            value = getattr(event, name)
            if value is not None:
                data[name] = value
        return data

    def _ended(self, event: RequestEnded) -> dict[str, Any]:
        data: dict[str, Any] = {"id": event.request_id, "outcome": event.outcome}
        for name in (
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "spec_decoding",
            "server_timing",
        ):
            value = getattr(event, name)
            if value is not None:
                data[name] = value
        if event.error is not None:
            data["error"] = self._text(event.error)
        if event.dropped_turns:
            data["dropped_turns"] = event.dropped_turns
        return data

    def _status(self, event: ServerStatusChanged) -> dict[str, Any]:
        data: dict[str, Any] = {"src": self._url(event.source), "status": event.status}
        if event.detail:
            data["detail"] = self._text(event.detail)
        return data

    def _log(self, event: ServerLogLine) -> dict[str, Any]:
        return {"src": self._url(event.source), "line": self._text(event.line)}

    def _marker(self, event: Marker) -> dict[str, Any]:
        return {"label": self._text(event.label)}

    def _canary(self, event: CanaryProbed) -> dict[str, Any]:
        data: dict[str, Any] = {
            "src": self._url(event.source),
            "outcome": event.outcome,
            "learned": event.learned_probes,
        }
        for name in _CANARY_NUMBERS:
            value = getattr(event, name)
            if value is not None:
                data[name] = value
        if event.error is not None:
            data["error"] = self._text(event.error)
        return data

    def _fleet(self, event: FleetSampled) -> dict[str, Any]:
        return encode_fleet(event, text=self._text, url=self._scrub.url, gpu=_gpu_dict)


# ---------------------------------------------------------------- values → events


_OUT_OF_RANGE = "an integer is out of range (beyond ±2**53)"


def _int(value: Any) -> int:
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordingFormatError(f"{value!r} is not a finite number")
    out = int(value)
    if not -MAX_INT <= out <= MAX_INT:
        raise RecordingFormatError(_OUT_OF_RANGE)
    return out


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    out = float(value)
    if not math.isfinite(out):
        raise RecordingFormatError(f"{value!r} is not a finite number")
    return out


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


_GPU_TEXT_FIELDS = frozenset({"name", "uuid", "host"})
_GPU_INT_FIELDS = frozenset({"memory_used_bytes", "memory_total_bytes"})


def _gpu_reading(d: dict[str, Any]) -> GpuReading:
    kwargs: dict[str, Any] = {"index": _int(d["index"])}
    for name in _GPU_FIELDS:
        if name in d and d[name] is not None:
            value = d[name]
            if name == "clock_event_reasons":
                if type(value) is not list:
                    raise RecordingFormatError("GPU clock_event_reasons must be a list")
                value = tuple(str(r) for r in value)
            elif name in _GPU_TEXT_FIELDS:
                if type(value) is not str:
                    raise RecordingFormatError(f"GPU {name} {value!r} is not text")
            elif name in _GPU_INT_FIELDS:
                n = number(value)
                if not n.is_integer():
                    raise RecordingFormatError(f"GPU {name} {value!r} is not an integer")
                value = int(n)
            else:
                value = number(value)
            kwargs[name] = value
    return GpuReading(**kwargs)


class EventDecoder:
    """Turns `[t, code, data]` values back into events. Unknown codes give None (ignored).

    Times are checked in file order: a time that is not finite, goes back more than
    MAX_BACKWARD_S from the latest before it, or jumps forward more than MAX_JUMP_S raises
    RecordingTimeError (the reader stops there).
    """

    def __init__(self) -> None:
        self._latest_t = 0.0
        self._metrics = MetricsDeltaDecoder()
        by_type: dict[type, Callable[[float, dict[str, Any]], Event]] = event_table(
            {
                StreamChunk: _chunk,
                MetricsScraped: self._metrics.decode,
                GpuSampled: _gpu,
                RequestStarted: _started,
                RequestEnded: _ended,
                ServerStatusChanged: _status,
                ServerLogLine: _log,
                Marker: _marker,
                FleetSampled: _fleet,
                CanaryProbed: _canary,
            },
            name="recording decoder",
        )
        self._decoders = {CODES[kind]: decode for kind, decode in by_type.items()}

    def decode(self, value: Any) -> Event | None:
        if type(value) is not list or len(value) < 3:
            raise RecordingFormatError("an event must be a list [t, code, data]")
        t = value[0]
        code = value[1]
        data = value[2]
        if type(t) is not float:
            if type(t) is not int:
                raise RecordingFormatError(f"event time {t!r:.40} is not a number")
            t = float(t) if -MAX_INT <= t <= MAX_INT else math.inf
        latest = self._latest_t
        if not latest - MAX_BACKWARD_S <= t <= latest + MAX_JUMP_S:  # NaN fails this too
            self._check_time(t)
        if type(data) is not dict:
            raise RecordingFormatError(f"event data for code {code!r} is not an object")
        try:
            decode = self._decoders.get(code)
        except TypeError:  # an unhashable code (a list, an object): not one of ours
            decode = None
        try:
            event = None if decode is None else decode(t, data)
        except RecordingFormatError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise RecordingFormatError(
                f"event {code!r} has bad data: {type(exc).__name__}: {exc}"
            ) from None
        # Only a line that was read moves the clock on (a skipped line's time is not trusted).
        if t > latest:
            self._latest_t = t
        return event

    def _check_time(self, t: float) -> None:
        """Raise RecordingTimeError for a time outside the allowed range, saying why."""
        latest = self._latest_t
        if not math.isfinite(t):
            raise RecordingTimeError(f"event time {t!r} is not a finite number")
        if t < latest - MAX_BACKWARD_S:
            raise RecordingTimeError(
                f"event time {t:.6g} s goes back {latest - t:.6g} s from {latest:.6g} s "
                f"(at most {MAX_BACKWARD_S:g} s allowed)"
            )
        if t > latest + MAX_JUMP_S:
            raise RecordingTimeError(
                f"event time {t:.6g} s jumps {t - latest:.6g} s ahead of {latest:.6g} s "
                f"(at most {MAX_JUMP_S:g} s allowed)"
            )


def _chunk(t: float, data: dict[str, Any]) -> StreamChunk:
    get = data.get
    rid = data["id"]
    text = get("x", "")
    reasoning = get("rz", "")
    role = get("role")
    n = get("n")
    p = get("p")
    finish = get("fr")
    if (
        type(rid) is not str
        or type(text) is not str
        or type(reasoning) is not str
        or (n is not None and type(n) is not int)
        or (p is not None and type(p) is not int)
        or (role is not None and type(role) is not str)
        or (finish is not None and type(finish) is not str)
    ):
        raise RecordingFormatError("a chunk field has the wrong type")
    if (n is not None and not -MAX_INT <= n <= MAX_INT) or (
        p is not None and not -MAX_INT <= p <= MAX_INT
    ):
        raise RecordingFormatError(_OUT_OF_RANGE)
    return StreamChunk(t, rid, text, reasoning, role, n, p, finish)


def _gpu(t: float, data: dict[str, Any]) -> GpuSampled:
    return GpuSampled(
        t=t,
        source=str(data.get("src", "")),
        gpus=tuple(_gpu_reading(g) for g in data.get("gpus", ())),
        error=_opt_str(data.get("error")),
    )


def _started(t: float, data: dict[str, Any]) -> RequestStarted:
    return RequestStarted(
        t=t,
        request_id=str(data["id"]),
        source=str(data.get("src", "")),
        model=str(data.get("model", "")),
        max_tokens=_opt_int(data.get("max_tokens")),
        temperature=_opt_float(data.get("temperature")),
        top_p=_opt_float(data.get("top_p")),
        prompt_chars=_int(data.get("prompt_chars", 0)),
    )


def _ended(t: float, data: dict[str, Any]) -> RequestEnded:
    spec = data.get("spec_decoding")
    timing = data.get("server_timing")
    return RequestEnded(
        t=t,
        request_id=str(data["id"]),
        outcome=_outcome(data.get("outcome", "ok")),
        prompt_tokens=_opt_int(data.get("prompt_tokens")),
        completion_tokens=_opt_int(data.get("completion_tokens")),
        finish_reason=_opt_str(data.get("finish_reason")),
        spec_decoding=spec if isinstance(spec, dict) else None,
        error=_opt_str(data.get("error")),
        server_timing=_timing(timing),
        dropped_turns=max(0, _int(data.get("dropped_turns", 0))),
    )


def _timing(value: Any) -> dict[str, Any] | None:
    """The recorded per-request timing fields: the known numeric ones only (else None)."""
    if not isinstance(value, dict):
        return None
    kept = {k: v for k in TIMING_FIELDS if type(v := value.get(k)) in (int, float)}
    return kept or None


def _status(t: float, data: dict[str, Any]) -> ServerStatusChanged:
    return ServerStatusChanged(
        t=t,
        source=str(data.get("src", "")),
        status=_server_status(data.get("status")),
        detail=str(data.get("detail", "")),
    )


def _log(t: float, data: dict[str, Any]) -> ServerLogLine:
    return ServerLogLine(t=t, source=str(data.get("src", "")), line=str(data["line"]))


_CANARY_NUMBERS = (
    "acceptance_length",
    "completion_tokens",
    "expected_al",
    "tolerance",
    "live_acceptance_length",
    "live_reference",
)


def _canary(t: float, data: dict[str, Any]) -> CanaryProbed:
    def al(name: str) -> float | None:
        value = _opt_float(data.get(name))
        return value if value is None or 0.0 <= value <= MAX_INT else None

    return CanaryProbed(
        t=t,
        source=str(data["src"]),
        outcome=_outcome(data.get("outcome", "ok")),
        acceptance_length=al("acceptance_length"),
        completion_tokens=_opt_int(data.get("completion_tokens")),
        expected_al=al("expected_al"),
        tolerance=al("tolerance"),
        learned_probes=_int(data.get("learned", 0)),
        live_acceptance_length=al("live_acceptance_length"),
        live_reference=al("live_reference"),
        error=_opt_str(data.get("error")),
    )


def _marker(t: float, data: dict[str, Any]) -> Marker:
    return Marker(t=t, label=str(data.get("label", "")))


def _fleet(t: float, data: dict[str, Any]) -> FleetSampled:
    return decode_fleet(t, data, gpu=_gpu_reading)


def _outcome(value: Any) -> RequestOutcome:
    if value == "ok" or value == "failed" or value == "cancelled":
        return value  # type: ignore[no-any-return]
    raise RecordingFormatError(f"unknown request outcome {value!r}")


def _server_status(value: Any) -> ServerStatus:
    if value in ("up", "stale", "down", "unreadable", "removed"):
        return value  # type: ignore[no-any-return]
    raise RecordingFormatError(f"unknown server status {value!r}")
