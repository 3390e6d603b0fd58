"""The `/metrics` delta encoding of recordings: a scrape is stored as only the samples that
changed since the previous stored scrape of the same source (a raw page at 1 Hz would be ~100 MB
an hour); `MetricsDeltaDecoder` rebuilds the full scrapes (docs/recording-format.md).
"""

from __future__ import annotations

import math
from typing import Any

from specmon.core.errors import RecordingFormatError
from specmon.core.events import Labels, MetricSample, MetricsScraped


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
            labels = self._labels[key] = labels_of(value)
            return labels
        except (AttributeError, TypeError):
            return labels_of(value)

    def decode(self, t: float, data: dict[str, Any]) -> MetricsScraped:
        source = str(data.get("src", ""))
        state = self._state.setdefault(source, {})
        labels_of = self._labels_of
        for item in data.get("gone", ()):
            name, labels = item[0], item[1]
            state.pop((str(name), labels_of(labels)), None)
        for item in data.get("s", ()):
            name, labels, value = str(item[0]), labels_of(item[1]), item[2]
            if type(value) is not float or value - value != 0.0:  # NaN, inf: refused by number
                value = number(value)
            # unchanged series keep their MetricSample object: a scrape rebuilds cheaply
            state[(name, labels)] = MetricSample(name, labels, value)
        return MetricsScraped(t=t, source=source, samples=tuple(state.values()))


def number(value: Any) -> float:
    """A recorded number as a finite float (live readings are never NaN or infinite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordingFormatError(f"metric value {value!r} is not a number")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise RecordingFormatError(f"metric value {value!r} is not a finite number")
    return out


def labels_of(value: Any) -> Labels:
    if not isinstance(value, dict):
        raise RecordingFormatError(f"metric labels must be an object, found {value!r}")
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))
