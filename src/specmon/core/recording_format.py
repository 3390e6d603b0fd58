"""The session recording format: pure encoding and decoding of header and event lines.

A recording is NDJSON (docs/recording-format.md). Line 1 is a header object
`{"format": "specmon-session", "version": 1, ...SessionInfo fields}`; every other line is an event
`[t, "code", {data}]` with `t` in seconds since the session started. This module turns events into
JSON-ready values and back; files, gzip, flushing and pacing live in runtime/recorder.py and
sources/recording_player.py. It also holds the secret scrubbing applied before anything is written.

`/metrics` scrapes are stored as only the samples that changed since the previous stored scrape of
the same source (`MetricsDeltaEncoder`); `MetricsDeltaDecoder` rebuilds the full scrapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from specmon.core.events import (
    Event,
    GpuReading,
    GpuSampled,
    Labels,
    Marker,
    MetricSample,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    ServerLogLine,
    ServerStatusChanged,
    SessionInfo,
    StreamChunk,
)

FORMAT = "specmon-session"
VERSION = 1

# Event codes (documented in docs/recording-format.md). Short: chunks are most of a recording.
CODE_REQUEST_STARTED = "rs"
CODE_CHUNK = "c"
CODE_REQUEST_ENDED = "re"
CODE_METRICS = "ms"
CODE_SERVER_STATUS = "ss"
CODE_LOG = "l"
CODE_GPU = "g"
CODE_MARKER = "m"

REDACTED = "[REDACTED]"


class RecordingFormatError(ValueError):
    """A header or event line that cannot be read (the message says what was wrong)."""


# ---------------------------------------------------------------- secrets

_NOT_DONE = r"(?!\[?REDACTED\])"
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # --api-key sk-…, --api-key=…, --hf-token …, --token …
    (
        re.compile(
            r"(?i)(--(?:api[-_]?key|hf[-_]?token|token|password|secret)s?(?:\s+|=)['\"]?)"
            + _NOT_DONE
            + r"[^\s'\",]+"
        ),
        r"\1" + REDACTED,
    ),
    # api_key='…', "api_key": "…", token=…, hf_token: …, password=…, authorization: …
    (
        re.compile(
            r"(?i)(['\"]?\b[\w.-]*(?:api[-_]?keys?|token|secret|password|passwd|authorization)"
            r"['\"]?\s*[:=]\s*(?:\[\s*)?['\"]?(?:bearer\s+|basic\s+)?)"
            + _NOT_DONE
            + r"[^\s'\",\])}]+"
        ),
        r"\1" + REDACTED,
    ),
    # Bearer <token> anywhere
    (re.compile(r"(?i)(\bbearer\s+)" + _NOT_DONE + r"[A-Za-z0-9._~+/=-]+"), r"\1" + REDACTED),
    # well-known token shapes: OpenAI sk-…, Hugging Face hf_…
    (re.compile(r"\b(?:sk-[A-Za-z0-9_-]{6,}|hf_[A-Za-z0-9]{6,})"), REDACTED),
    # credentials inside URLs: scheme://user:password@host
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + REDACTED + "@"),
)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with API keys, tokens, passwords and Authorization values replaced by [REDACTED].

    Known secret values (the key in use, tokens from the environment) are replaced wherever they
    occur; keys written as command-line options, `key=value` pairs, JSON fields, Bearer headers,
    `sk-…`/`hf_…` tokens and `user:password@` in URLs are recognised by shape.
    """
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str | None) -> str | None:
    """A URL without `user:password@` credentials (None stays None)."""
    if url is None:
        return None
    return re.sub(r"(?i)^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url)


# ---------------------------------------------------------------- header

_INFO_FIELDS = tuple(f.name for f in fields(SessionInfo))


def encode_header(
    info: SessionInfo, *, started_at: str | None = None, secrets: Iterable[str] = ()
) -> dict[str, Any]:
    """The header object (line 1) for a session: format, version, and every SessionInfo field."""
    secrets = tuple(secrets)
    header: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if started_at is not None:
        header["started_at"] = started_at
    for name in _INFO_FIELDS:
        value = getattr(info, name)
        if name == "server":
            value = redact_url(value)
        header[name] = _redact_value(value, secrets)
    return header


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {str(k): _redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v, secrets) for v in value]
    return value


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
    if n_spec is not None and not isinstance(n_spec, int):
        kwargs["n_spec"] = None
    for name in ("server", "model", "draft_model", "method", "vllm_version", "gpu"):
        if name in kwargs and kwargs[name] is not None and not isinstance(kwargs[name], str):
            kwargs[name] = str(kwargs[name])
    return SessionInfo(**kwargs)


# ---------------------------------------------------------------- events → values


def _labels_dict(labels: Labels) -> dict[str, str]:
    return dict(labels)


def _gpu_dict(g: GpuReading) -> dict[str, Any]:
    out: dict[str, Any] = {"index": g.index}
    for name in _GPU_FIELDS:
        value = getattr(g, name)
        if value is not None:
            out[name] = list(value) if name == "clock_event_reasons" else value
    return out


_GPU_FIELDS = tuple(f.name for f in fields(GpuReading) if f.name != "index")


class MetricsDeltaEncoder:
    """Keeps the last stored scrape per source and yields only the samples that changed.

    Data of a stored scrape: `{"src": source, "s": [[name, {labels}, value], ...]}` with the changed
    or new samples, plus `"gone": [[name, {labels}], ...]` for samples no longer on the page.
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[MetricSample, ...]] = {}

    def encode(self, event: MetricsScraped) -> dict[str, Any]:
        samples = event.samples
        previous = self._last.get(event.source, ())
        self._last[event.source] = samples
        data: dict[str, Any] = {"src": event.source}
        # Fast path: a page lists the same series in the same order scrape after scrape.
        if len(previous) == len(samples):
            changed: list[list[Any]] = []
            for old, new in zip(previous, samples, strict=True):
                if old.name != new.name or old.labels != new.labels:
                    break
                a, b = old.value, new.value
                # NaN never equals itself: a NaN that stays NaN is not a change.
                if a != b and (a == a or b == b):
                    changed.append([new.name, dict(new.labels), b])
            else:
                data["s"] = changed
                return data
        before = {(p.name, p.labels): p.value for p in previous}
        changed = []
        keys = set()
        for sample in samples:
            key = (sample.name, sample.labels)
            keys.add(key)
            value = sample.value
            old = before.get(key, _MISSING)
            if old is _MISSING or (old != value and (old == old or value == value)):
                changed.append([sample.name, dict(sample.labels), value])
        data["s"] = changed
        gone = [[name, dict(labels)] for (name, labels) in before if (name, labels) not in keys]
        if gone:
            data["gone"] = gone
        return data


_MISSING: Any = object()


class MetricsDeltaDecoder:
    """Rebuilds full scrapes from stored changed-sample deltas, per source."""

    def __init__(self) -> None:
        self._state: dict[str, dict[tuple[str, Labels], MetricSample]] = {}
        self._labels: dict[Any, Labels] = {}

    def _labels_of(self, value: Any) -> Labels:
        # The same label sets come back every scrape: convert each one once.
        try:
            key = tuple(value.items())
            return self._labels[key]
        except KeyError:
            labels = self._labels[key] = _labels_of(value)
            return labels
        except (AttributeError, TypeError):
            return _labels_of(value)

    def decode(self, t: float, data: dict[str, Any]) -> MetricsScraped:
        source = str(data.get("src", ""))
        state = self._state.setdefault(source, {})
        labels_of = self._labels_of
        for item in data.get("gone", ()):
            name, labels = item[0], item[1]
            state.pop((str(name), labels_of(labels)), None)
        for item in data.get("s", ()):
            name, labels, value = str(item[0]), labels_of(item[1]), item[2]
            if type(value) is not float:
                value = _number(value)
            # unchanged series keep their MetricSample object: a scrape rebuilds cheaply
            state[(name, labels)] = MetricSample(name, labels, value)
        return MetricsScraped(t=t, source=source, samples=tuple(state.values()))


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordingFormatError(f"metric value {value!r} is not a number")
    return float(value)


def _labels_of(value: Any) -> Labels:
    if not isinstance(value, dict):
        raise RecordingFormatError(f"metric labels must be an object, found {value!r}")
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


class EventEncoder:
    """Turns events into `[t, code, data]` values (stateful only for /metrics deltas).

    `secrets` are literal values scrubbed from every text field; log lines, error texts and
    status details are also scrubbed by shape (redact_text).
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._metrics = MetricsDeltaEncoder()
        self._secrets = tuple(s for s in secrets if s)

    def _text(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def _plain(self, text: str) -> str:
        # Model text is data: only literal known secrets are removed, never by shape.
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def encode(self, event: Event) -> list[Any]:
        t = event.t
        if isinstance(event, StreamChunk):
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
            return [t, CODE_CHUNK, data]
        if isinstance(event, MetricsScraped):
            return [t, CODE_METRICS, self._metrics.encode(event)]
        if isinstance(event, GpuSampled):
            data = {"src": event.source, "gpus": [_gpu_dict(g) for g in event.gpus]}
            if event.error is not None:
                data["error"] = self._text(event.error)
            return [t, CODE_GPU, data]
        if isinstance(event, RequestStarted):
            data = {
                "id": event.request_id,
                "src": redact_url(event.source),
                "model": event.model,
                "prompt_chars": event.prompt_chars,
            }
            for name in ("max_tokens", "temperature", "top_p"):
                value = getattr(event, name)
                if value is not None:
                    data[name] = value
            return [t, CODE_REQUEST_STARTED, data]
        if isinstance(event, RequestEnded):
            data = {"id": event.request_id, "outcome": event.outcome}
            for name in ("prompt_tokens", "completion_tokens", "finish_reason", "spec_decoding"):
                value = getattr(event, name)
                if value is not None:
                    data[name] = value
            if event.error is not None:
                data["error"] = self._text(event.error)
            return [t, CODE_REQUEST_ENDED, data]
        if isinstance(event, ServerStatusChanged):
            data = {"src": redact_url(event.source), "status": event.status}
            if event.detail:
                data["detail"] = self._text(event.detail)
            return [t, CODE_SERVER_STATUS, data]
        if isinstance(event, ServerLogLine):
            return [t, CODE_LOG, {"src": redact_url(event.source), "line": self._text(event.line)}]
        if isinstance(event, Marker):
            return [t, CODE_MARKER, {"label": self._text(event.label)}]
        raise TypeError(f"not a specmon event: {type(event).__name__}")


# ---------------------------------------------------------------- values → events


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


_GPU_TEXT_FIELDS = frozenset({"name", "uuid", "host"})
_GPU_INT_FIELDS = frozenset({"memory_used_bytes", "memory_total_bytes"})


def _gpu_reading(d: dict[str, Any]) -> GpuReading:
    kwargs: dict[str, Any] = {"index": int(d["index"])}
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
                number = _number(value)
                if not number.is_integer():
                    raise RecordingFormatError(f"GPU {name} {value!r} is not an integer")
                value = int(number)
            else:
                value = _number(value)
            kwargs[name] = value
    return GpuReading(**kwargs)


class EventDecoder:
    """Turns `[t, code, data]` values back into events. Unknown codes give None (ignored)."""

    def __init__(self) -> None:
        self._metrics = MetricsDeltaDecoder()

    def decode(self, value: Any) -> Event | None:
        if type(value) is not list or len(value) < 3:
            raise RecordingFormatError("an event must be a list [t, code, data]")
        t = value[0]
        code = value[1]
        data = value[2]
        if type(t) is not float:
            if type(t) is not int:
                raise RecordingFormatError(f"event time {t!r} is not a number")
            t = float(t)
        if type(data) is not dict:
            raise RecordingFormatError(f"event data for code {code!r} is not an object")
        try:
            if code == CODE_CHUNK:
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
                return StreamChunk(t, rid, text, reasoning, role, n, p, finish)
            if code == CODE_METRICS:
                return self._metrics.decode(t, data)
            if code == CODE_GPU:
                return GpuSampled(
                    t=t,
                    source=str(data.get("src", "")),
                    gpus=tuple(_gpu_reading(g) for g in data.get("gpus", ())),
                    error=_opt_str(data.get("error")),
                )
            if code == CODE_REQUEST_STARTED:
                return RequestStarted(
                    t=t,
                    request_id=str(data["id"]),
                    source=str(data.get("src", "")),
                    model=str(data.get("model", "")),
                    max_tokens=_opt_int(data.get("max_tokens")),
                    temperature=_opt_float(data.get("temperature")),
                    top_p=_opt_float(data.get("top_p")),
                    prompt_chars=int(data.get("prompt_chars", 0)),
                )
            if code == CODE_REQUEST_ENDED:
                spec = data.get("spec_decoding")
                return RequestEnded(
                    t=t,
                    request_id=str(data["id"]),
                    outcome=_outcome(data.get("outcome", "ok")),
                    prompt_tokens=_opt_int(data.get("prompt_tokens")),
                    completion_tokens=_opt_int(data.get("completion_tokens")),
                    finish_reason=_opt_str(data.get("finish_reason")),
                    spec_decoding=spec if isinstance(spec, dict) else None,
                    error=_opt_str(data.get("error")),
                )
            if code == CODE_SERVER_STATUS:
                return ServerStatusChanged(
                    t=t,
                    source=str(data.get("src", "")),
                    status=_status(data.get("status")),
                    detail=str(data.get("detail", "")),
                )
            if code == CODE_LOG:
                return ServerLogLine(t=t, source=str(data.get("src", "")), line=str(data["line"]))
            if code == CODE_MARKER:
                return Marker(t=t, label=str(data.get("label", "")))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            if isinstance(exc, RecordingFormatError):
                raise
            raise RecordingFormatError(
                f"event {code!r} has bad data: {type(exc).__name__}: {exc}"
            ) from None
        return None


def _outcome(value: Any) -> Any:
    if value not in ("ok", "failed", "cancelled"):
        raise RecordingFormatError(f"unknown request outcome {value!r}")
    return value


def _status(value: Any) -> Any:
    if value not in ("up", "stale", "down", "unreadable"):
        raise RecordingFormatError(f"unknown server status {value!r}")
    return value
