"""Recorder → file → player: every event comes back equal, in plain and gzip files."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.core.clock import FakeClock
from specmon.core.events import (
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
    labels_of,
)
from specmon.core.recording_format import MAX_BACKWARD_S
from specmon.runtime.recorder import Recorder, RecordingExistsError
from specmon.sources.recording_player import read_recording

INFO = SessionInfo(
    server="http://127.0.0.1:8000",
    model="m",
    draft_model="d",
    method="dflash",
    n_spec=8,
    vllm_version="0.11.0",
    gpu="RTX",
    simulated=True,
    extra={"sim_profile": "p"},
)


def _sample(name: str, value: float, **labels: str) -> MetricSample:
    return MetricSample(name, labels_of({"engine": "0", "model_name": "m", **labels}), value)


def _events() -> list:
    s1 = (
        _sample("vllm:generation_tokens_total", 10.0),
        _sample("vllm:spec_decode_num_drafts_total", 3.0),
        _sample("vllm:spec_decode_num_accepted_tokens_per_pos_total", 2.0, position="0"),
        _sample("vllm:num_requests_running", 1.0),
    )
    s2 = (
        _sample("vllm:generation_tokens_total", 25.0),
        _sample("vllm:spec_decode_num_drafts_total", 3.0),
        _sample("vllm:spec_decode_num_accepted_tokens_per_pos_total", 2.0, position="0"),
        _sample("vllm:num_requests_running", 0.0),
    )
    s3 = s2[:2]  # two series disappeared
    return [
        RequestStarted(0.1, "r1", "http://127.0.0.1:8000", "m", 64, 0.0, 1.0, 12),
        StreamChunk(0.2, "r1", "", "", "assistant", 0, 7),
        StreamChunk(0.3, "r1", "Hello \u2028 \x1b[31m wörld\n", "think", None, 4, 7),
        StreamChunk(0.4, "r1", "!", "", None, 5, 7, "stop"),
        RequestEnded(
            0.45, "r1", "ok", 7, 5, "stop", {"mean_acceptance_length": 2.5, "num_spec_steps": 2}
        ),
        RequestEnded(0.5, "r2", "failed", None, 3, None, None, "connection lost"),
        MetricsScraped(1.0, "http://127.0.0.1:8000", s1),
        MetricsScraped(2.0, "http://127.0.0.1:8000", s2),
        MetricsScraped(2.5, "http://other:8000", s1),
        MetricsScraped(3.0, "http://127.0.0.1:8000", s3),
        ServerStatusChanged(3.5, "http://127.0.0.1:8000", "stale", "no answer"),
        ServerLogLine(4.0, "http://127.0.0.1:8000", "INFO Engine 000: Avg prompt throughput"),
        GpuSampled(
            4.5,
            "gpu",
            (
                GpuReading(0, "RTX", None, 61.0, 90.0, 1 << 30, 24 << 30, 98.0, 300.0, 450.0),
                GpuReading(1, clock_event_reasons=("sw_power_cap", "hw_slowdown"), host="h"),
                GpuReading(2, clock_event_reasons=()),
            ),
        ),
        GpuSampled(5.0, "gpu", (), "NVML not available"),
        Marker(5.5, "warm-up done"),
    ]


@pytest.mark.parametrize("name", ["s.ndjson", "s.ndjson.gz"])
def test_every_event_comes_back_equal(tmp_path, name):
    path = tmp_path / name
    events = _events()
    with Recorder(path, INFO, clock=FakeClock()) as rec:
        for e in events:
            rec.write(e)
    rec_read = read_recording(path)
    assert rec_read.problems == []
    assert rec_read.info == INFO
    assert rec_read.events == events


def test_gzip_by_extension_and_plain_otherwise(tmp_path):
    for name, gz in (("a.ndjson.gz", True), ("a.ndjson", False)):
        with Recorder(tmp_path / name, INFO, clock=FakeClock()) as rec:
            rec.write(Marker(1.0, "x"))
        raw = (tmp_path / name).read_bytes()
        assert raw[:2] == b"\x1f\x8b" if gz else raw.startswith(b'{"format":"specmon-session"')


def test_header_line_and_event_shape(tmp_path):
    path = tmp_path / "s.ndjson"
    with Recorder(path, INFO, clock=FakeClock(), started_at="2026-01-01T00:00:00+00:00") as rec:
        rec.write(StreamChunk(0.25, "r1", "hi", completion_tokens=3))
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "specmon-session"
    assert header["version"] == 1
    assert header["simulated"] is True
    assert header["n_spec"] == 8
    assert header["started_at"] == "2026-01-01T00:00:00+00:00"
    t, code, data = json.loads(lines[1])
    assert (t, code) == (0.25, "c")
    assert data == {"id": "r1", "x": "hi", "n": 3}


def test_metrics_stored_as_changed_samples_only(tmp_path):
    path = tmp_path / "s.ndjson"
    events = [e for e in _events() if isinstance(e, MetricsScraped)]
    with Recorder(path, INFO, clock=FakeClock()) as rec:
        for e in events:
            rec.write(e)
    stored = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    assert [len(d["s"]) for _, _, d in stored] == [4, 2, 4, 0]
    assert {s[0] for s in stored[1][2]["s"]} == {
        "vllm:generation_tokens_total",
        "vllm:num_requests_running",
    }
    assert len(stored[3][2]["gone"]) == 2
    # ... and the player rebuilds the full scrapes
    assert read_recording(path).events == events


def test_recordings_are_never_overwritten(tmp_path):
    path = tmp_path / "s.ndjson"
    path.write_text("precious")
    with pytest.raises(RecordingExistsError, match="already exists"):
        Recorder(path, INFO)
    assert path.read_text() == "precious"


def test_flushed_at_least_once_a_second_by_the_clock(tmp_path):
    """Lines reach the file once the flush interval passed, without closing the recorder."""
    path = tmp_path / "s.ndjson.gz"
    clock = FakeClock()
    rec = Recorder(path, INFO, clock=clock, flush_interval=1.0)
    rec.write(Marker(0.1, "first"))
    clock.advance(0.5)
    rec.write(Marker(0.5, "second"))
    # half a second: may still be buffered; after a second the tick flushes
    clock.advance(0.6)
    rec.flush_if_due()
    seen = read_recording(path)
    assert [e.label for e in seen.events] == ["first", "second"]
    rec.write(Marker(1.2, "third"))
    clock.advance(1.0)
    rec.write(Marker(2.2, "fourth"))  # a write after the interval flushes on its own
    assert [e.label for e in read_recording(path).events] == ["first", "second", "third", "fourth"]
    rec.close()
    with gzip.open(path, "rt") as f:  # closed: a complete gzip stream
        assert len(f.read().splitlines()) == 5


_times = st.floats(min_value=0.0, max_value=MAX_BACKWARD_S, width=64)
"""Times in any order within the reader's backward tolerance (docs/recording-format.md)."""
_text = st.text(max_size=40)


@given(
    st.lists(
        st.one_of(
            st.builds(
                StreamChunk,
                t=_times,
                request_id=_text,
                text=_text,
                reasoning=_text,
                role=st.none() | st.just("assistant"),
                completion_tokens=st.none() | st.integers(0, 10**6),
                prompt_tokens=st.none() | st.integers(0, 10**6),
                finish_reason=st.none() | st.sampled_from(["stop", "length"]),
            ),
            st.builds(Marker, t=_times, label=st.text(alphabet="abc xyz", max_size=10)),
            st.builds(
                MetricsScraped,
                t=_times,
                source=st.sampled_from(["a", "b"]),
                samples=st.dictionaries(
                    st.tuples(
                        st.sampled_from(["vllm:x_total", "vllm:y"]),
                        st.sampled_from(["0", "1", "2"]),
                    ),
                    st.floats(allow_nan=False, allow_infinity=False),
                    max_size=5,
                ).map(
                    lambda d: tuple(
                        MetricSample(n, labels_of({"engine": e}), v) for (n, e), v in d.items()
                    )
                ),
            ),
        ),
        max_size=30,
    )
)
def test_roundtrip_property(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("rt") / "p.ndjson"
    with Recorder(path, SessionInfo(), clock=FakeClock()) as rec:
        for e in events:
            rec.write(e)
    back = read_recording(path).events
    assert len(back) == len(events)
    for a, b in zip(back, events, strict=True):
        if isinstance(b, MetricsScraped):
            # order of series may differ; values and names must not
            assert (a.t, a.source) == (b.t, b.source)
            assert sorted(a.samples, key=repr) == sorted(b.samples, key=repr)
            assert all(not math.isnan(s.value) for s in a.samples)
        else:
            assert a == b
