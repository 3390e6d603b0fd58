"""vLLM's per-request timing metrics (`--enable-per-request-metrics`): validation and the split of
the client's TTFT into the engine's share and the rest (network, API server, client)."""

from __future__ import annotations

import math

import pytest

from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.core.recording_format import EventDecoder, EventEncoder
from specmon.core.server_timing import ServerTiming, parse_server_timing, ttft_split
from specmon.core.stream_stats import RequestTrace, request_stats

FULL = {
    "time_to_first_token_ms": 120.0,
    "generation_time_ms": 900.0,
    "queue_time_ms": 30.0,
    "mean_itl_ms": 9.0,
    "tokens_per_second": 98.5,
}


def test_the_fields_are_read_in_seconds():
    t = parse_server_timing(FULL)
    assert t == ServerTiming(
        queue_s=0.03, ttft_s=0.12, generation_s=0.9, mean_itl_s=0.009, tokens_per_second=98.5
    )
    assert t is not None and t.to_first_token_s == pytest.approx(0.15)


@pytest.mark.parametrize(
    "bad", [None, True, "12", -1.0, math.inf, math.nan, 1e12, [1], {"x": 1}], ids=repr
)
def test_one_bad_field_is_dropped_and_the_others_kept(bad):
    t = parse_server_timing({**FULL, "queue_time_ms": bad})
    assert t is not None and t.queue_s is None and t.ttft_s == pytest.approx(0.12)


@pytest.mark.parametrize("data", [None, [], "x", {}, {"speculative_decoding": {}}], ids=repr)
def test_no_usable_field_is_no_timing(data):
    assert parse_server_timing(data) is None


def test_the_split_names_what_happened_outside_the_engine():
    split = ttft_split(0.4, parse_server_timing(FULL))
    assert split is not None
    assert split.server_ttft_s == pytest.approx(0.15)
    assert split.outside_s == pytest.approx(0.25)
    assert split.outside_share == pytest.approx(0.625)
    assert ttft_split(None, parse_server_timing(FULL)) is None
    assert ttft_split(0.4, None) is None
    assert ttft_split(0.4, ServerTiming(queue_s=0.1)) is None  # no server TTFT: no split


def _trace(timing: dict | None) -> RequestTrace:
    trace = RequestTrace("r1")
    trace.add(RequestStarted(t=10.0, request_id="r1", source="s", model="m"))
    trace.add(StreamChunk(t=10.5, request_id="r1", text="a", completion_tokens=1))
    trace.add(StreamChunk(t=10.6, request_id="r1", text="bc", completion_tokens=3))
    trace.add(RequestEnded(t=10.7, request_id="r1", completion_tokens=3, server_timing=timing))
    return trace


def test_request_stats_carry_the_timing_and_the_split():
    stats = request_stats(_trace(FULL))
    assert stats.server_timing is not None and stats.ttft_split is not None
    assert stats.ttft_split.client_ttft_s == pytest.approx(0.5)
    assert stats.ttft_split.outside_s == pytest.approx(0.35)
    plain = request_stats(_trace(None))
    assert plain.server_timing is None and plain.ttft_split is None


def test_the_timing_survives_a_recording_and_old_recordings_still_read():
    ended = RequestEnded(t=1.0, request_id="r1", completion_tokens=3, server_timing=FULL)
    line = EventEncoder().encode(ended)
    assert line[2]["server_timing"] == FULL
    back = EventDecoder().decode(line)
    assert isinstance(back, RequestEnded) and back.server_timing == FULL
    old = EventDecoder().decode([1.0, "re", {"id": "r1", "outcome": "ok"}])
    assert isinstance(old, RequestEnded) and old.server_timing is None
    hostile = EventDecoder().decode(
        [1.0, "re", {"id": "r1", "server_timing": {"queue_time_ms": "x" * 50, "junk": 1}}]
    )
    assert isinstance(hostile, RequestEnded) and hostile.server_timing is None
