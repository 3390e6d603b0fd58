"""Recording encode/decode of `FleetSampled` (code "fl", docs/recording-format.md).

Data: `{"src": prometheus URL, "w": rate window s, "targets": [{...}], "history": [{...}],
"error": text}`. A target is an object of its non-None fields (tuples as lists, GPU readings as
the recording's GPU objects); a history is an object of parallel lists. Readers ignore unknown
keys. URLs are stored with credentials removed; error texts are scrubbed like log lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from specmon.core.errors import RecordingFormatError
from specmon.core.events import FleetHistory, FleetSampled, FleetTarget, GpuReading
from specmon.core.metrics_delta import number

_TEXT = frozenset({"instance", "job", "health", "url", "last_error"})
_TUPLES = frozenset({"accepted_per_pos_per_s", "accepted_per_pos"})
_TARGET_FIELDS = tuple(f.name for f in fields(FleetTarget) if f.name != "gpus")
_HISTORY_SERIES = (
    "ago_s",
    "generation_tok_s",
    "accepted_per_s",
    "drafts_per_s",
    "requests_running",
    "kv_cache_usage_frac",
)


def encode_fleet(
    e: FleetSampled,
    *,
    text: Callable[[str], str],
    url: Callable[[str], str | None],
    gpu: Callable[[GpuReading], dict[str, Any]],
) -> dict[str, Any]:
    data: dict[str, Any] = {"src": url(e.source) or e.source, "w": e.rate_window_s, "targets": []}
    for x in e.targets:
        d: dict[str, Any] = {}
        for name in _TARGET_FIELDS:
            value = getattr(x, name)
            if value is None:
                continue
            if name == "url":
                value = url(value) or value
            elif name == "last_error":
                if not value:
                    continue
                value = text(value)
            elif name in _TUPLES:
                value = list(value)
            d[name] = value
        if x.gpus:
            d["gpus"] = [gpu(g) for g in x.gpus]
        data["targets"].append(d)
    if e.history:
        data["history"] = [
            {
                "instance": h.instance,
                "job": h.job,
                "step_s": h.step_s,
                **{name: list(getattr(h, name)) for name in _HISTORY_SERIES},
            }
            for h in e.history
        ]
    if e.error is not None:
        data["error"] = text(e.error)
    return data


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise RecordingFormatError(f"fleet {what} {value!r} is not text")
    return value


def _opt_numbers(value: Any, what: str) -> tuple[float | None, ...]:
    if type(value) is not list:
        raise RecordingFormatError(f"fleet {what} must be a list")
    return tuple(None if v is None else number(v) for v in value)


def _numbers(value: Any, what: str) -> tuple[float, ...]:
    out = _opt_numbers(value, what)
    if any(v is None for v in out):
        raise RecordingFormatError(f"fleet {what} has a missing value")
    return tuple(v for v in out if v is not None)


def _target(d: Any, gpu: Callable[[dict[str, Any]], GpuReading]) -> FleetTarget:
    if type(d) is not dict:
        raise RecordingFormatError("a fleet target must be an object")
    kwargs: dict[str, Any] = {}
    for name in _TARGET_FIELDS:
        if name not in d or d[name] is None:
            continue
        value = d[name]
        if name in _TEXT:
            kwargs[name] = _text(value, name)
        elif name in _TUPLES:
            kwargs[name] = _numbers(value, name)
        else:
            kwargs[name] = number(value)
    if "instance" not in kwargs or "job" not in kwargs:
        raise RecordingFormatError("a fleet target needs instance and job")
    gpus = d.get("gpus", [])
    if type(gpus) is not list or any(type(g) is not dict for g in gpus):
        raise RecordingFormatError("fleet target gpus must be a list of objects")
    kwargs["gpus"] = tuple(gpu(g) for g in gpus)
    return FleetTarget(**kwargs)


def _history(d: Any) -> FleetHistory:
    if type(d) is not dict:
        raise RecordingFormatError("a fleet history must be an object")
    series = {name: _opt_numbers(d.get(name, []), name) for name in _HISTORY_SERIES}
    if len({len(v) for v in series.values()}) > 1:
        raise RecordingFormatError("fleet history series differ in length")
    ago = tuple(v for v in series.pop("ago_s") if v is not None)
    if len(ago) != len(series["generation_tok_s"]):
        raise RecordingFormatError("fleet history ago_s has a missing value")
    return FleetHistory(
        instance=_text(d.get("instance"), "instance"),
        job=_text(d.get("job"), "job"),
        step_s=number(d.get("step_s")),
        ago_s=ago,
        **series,
    )


def decode_fleet(
    t: float, data: dict[str, Any], *, gpu: Callable[[dict[str, Any]], GpuReading]
) -> FleetSampled:
    targets = data.get("targets", [])
    history = data.get("history", [])
    if type(targets) is not list or type(history) is not list:
        raise RecordingFormatError("fleet targets and history must be lists")
    error = data.get("error")
    return FleetSampled(
        t=t,
        source=_text(data.get("src", ""), "src"),
        rate_window_s=number(data.get("w", 0.0)),
        targets=tuple(_target(x, gpu) for x in targets),
        history=tuple(_history(h) for h in history),
        error=None if error is None else _text(error, "error"),
    )
