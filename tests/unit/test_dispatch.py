"""Every place that dispatches on event type (session fold, recording encoder and decoder, the UI's
text tail) has a handler for every event type: a new event type without one fails here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import pytest

from specmon.core import dispatch
from specmon.core.dispatch import EVENT_TYPES, MissingHandlerError, event_table
from specmon.core.events import (
    CanaryProbed,
    Event,
    FleetSampled,
    FleetTarget,
    GpuReading,
    GpuSampled,
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
from specmon.core.recording_format import CODES, EventDecoder, EventEncoder
from specmon.core.session_state import SessionState

ONE_OF_EACH: tuple[Event, ...] = (
    RequestStarted(t=0.0, request_id="r", source="http://h", model="m", max_tokens=8),
    StreamChunk(t=0.1, request_id="r", text="hi", completion_tokens=1),
    RequestEnded(t=0.2, request_id="r", completion_tokens=1),
    MetricsScraped(
        t=0.3, source="http://h", samples=(MetricSample("vllm:generation_tokens_total", (), 1.0),)
    ),
    ServerStatusChanged(t=0.4, source="http://h", status="down", detail="gone"),
    ServerLogLine(t=0.5, source="http://h", line="INFO hello"),
    GpuSampled(t=0.6, source="gpu", gpus=(GpuReading(index=0, temperature_c=50.0),)),
    Marker(t=0.7, label="here"),
    FleetSampled(
        t=0.8,
        source="http://prom:9090",
        rate_window_s=60.0,
        targets=(FleetTarget(instance="h:8000", job="vllm", health="up", drafts_per_s=1.0),),
    ),
    CanaryProbed(t=0.9, source="http://h", acceptance_length=3.2, expected_al=3.4, tolerance=0.2),
)


def _places() -> dict[str, set[type]]:
    return {
        "session fold": set(SessionState(SessionInfo())._handlers),
        "recording encoder": set(EventEncoder()._encoders),
        "recording decoder": {t for t, code in CODES.items() if code in EventDecoder()._decoders},
    }


def test_the_examples_cover_every_event_type() -> None:
    assert set(EVENT_TYPES) == set(get_args(Event))
    assert {type(e) for e in ONE_OF_EACH} == set(EVENT_TYPES)


@pytest.mark.parametrize("place", ["session fold", "recording encoder", "recording decoder"])
def test_every_place_handles_every_event_type(place: str) -> None:
    assert _places()[place] == set(EVENT_TYPES)


def test_every_event_type_has_its_own_recording_code() -> None:
    assert set(CODES) == set(EVENT_TYPES)
    assert len(set(CODES.values())) == len(CODES)


def test_every_event_type_round_trips_through_the_recording_codec() -> None:
    enc, dec = EventEncoder(), EventDecoder()
    for event in ONE_OF_EACH:
        assert dec.decode(enc.encode(event)) == event


def test_the_session_fold_takes_every_event_type() -> None:
    state = SessionState(SessionInfo())
    for event in ONE_OF_EACH:
        state.apply(event)
    assert state.events == len(ONE_OF_EACH)
    state.apply("not an event")  # type: ignore[arg-type]
    assert state.events == len(ONE_OF_EACH)


@dataclass(frozen=True, slots=True)
class _NewEvent:
    t: float


def test_a_new_event_type_without_handlers_fails_in_every_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dispatch, "EVENT_TYPES", (*EVENT_TYPES, _NewEvent))
    for build in (lambda: SessionState(SessionInfo()), EventEncoder, EventDecoder):
        with pytest.raises(MissingHandlerError, match="no handler for _NewEvent"):
            build()


def test_a_table_naming_a_non_event_is_refused() -> None:
    handlers = dict.fromkeys(EVENT_TYPES, dispatch.ignore)
    handlers[_NewEvent] = dispatch.ignore
    with pytest.raises(MissingHandlerError, match="non-events _NewEvent"):
        event_table(handlers, name="t")
