"""Reading damaged, foreign and newer recordings: keep what is whole, say what is not."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from specmon.core.clock import FakeClock
from specmon.core.events import Marker, SessionInfo, StreamChunk
from specmon.runtime.recorder import Recorder
from specmon.sources.recording_player import RecordingError, read_recording

HEADER = json.dumps({"format": "specmon-session", "version": 1, "model": "m"})


def _write(path, *lines: str, end: str = "\n") -> None:
    path.write_text("\n".join(lines) + end)


def test_torn_last_line_is_tolerated_and_reported_with_its_number(tmp_path):
    path = tmp_path / "s.ndjson"
    lines = ['[0.1,"m",{"label":"a"}]', '[0.2,"m",{"label":"b"}]', '[0.3,"m",{"la']
    _write(path, HEADER, *lines, end="")
    rec = read_recording(path)
    assert [e.label for e in rec.events] == ["a", "b"]
    assert len(rec.problems) == 1
    assert rec.problems[0].line == 4
    assert "torn" in rec.problems[0].message


def test_bad_line_in_the_middle_is_reported_and_the_rest_kept(tmp_path):
    path = tmp_path / "s.ndjson"
    _write(
        path,
        HEADER,
        '[0.1,"m",{"label":"a"}]',
        "this is not json",
        '[0.3,"c",{"id":"r","n":"three"}]',
        '[0.4,"m",{"label":"d"}]',
    )
    rec = read_recording(path)
    assert [e.label for e in rec.events] == ["a", "d"]
    assert [p.line for p in rec.problems] == [3, 4]


def test_unknown_codes_and_keys_are_ignored(tmp_path):
    path = tmp_path / "s.ndjson"
    header = json.dumps(
        {"format": "specmon-session", "version": 1, "model": "m", "future_key": {"a": 1}}
    )
    _write(
        path,
        header,
        '[0.1,"zz",{"whatever":1}]',
        '[0.2,"c",{"id":"r1","x":"hi","n":2,"new_field":true}]',
        "# a comment line",
    )
    rec = read_recording(path)
    assert rec.problems == []
    assert rec.info.model == "m"
    assert rec.events == [StreamChunk(0.2, "r1", "hi", completion_tokens=2)]


def test_newer_version_is_refused_clearly(tmp_path):
    path = tmp_path / "s.ndjson"
    _write(path, json.dumps({"format": "specmon-session", "version": 2}))
    with pytest.raises(RecordingError, match=r"version 2 is newer .*upgrade specmon"):
        read_recording(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ('{"version": 2}\n', "not a specmon recording"),
        ("[1, 2, 3]\n", "not a specmon header"),
        ("garbage\n", "not JSON"),
    ],
)
def test_foreign_files_are_refused_with_a_message(tmp_path, content, message):
    path = tmp_path / "s.ndjson"
    path.write_text(content)
    with pytest.raises(RecordingError, match=message):
        read_recording(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(RecordingError, match="no such recording"):
        read_recording(tmp_path / "nope.ndjson")


def test_gzip_cut_without_trailer_keeps_flushed_lines(tmp_path):
    """A crash before close leaves a gzip stream without trailer: flushed lines are kept."""
    path = tmp_path / "s.ndjson.gz"
    clock = FakeClock()
    rec = Recorder(path, SessionInfo(model="m"), clock=clock)
    for i in range(50):
        rec.write(Marker(float(i), f"m{i}"))
    clock.advance(2.0)
    rec.flush_if_due()
    data = path.read_bytes()
    # simulate the crash: copy what is on disk now, never closed
    crashed = tmp_path / "crashed.ndjson.gz"
    crashed.write_bytes(data)
    rec.close()
    got = read_recording(crashed)
    assert [e.label for e in got.events] == [f"m{i}" for i in range(50)]
    # and a cut inside the compressed data: whole lines before the cut survive
    cut = tmp_path / "cut.ndjson.gz"
    full = gzip.compress(
        (HEADER + "\n" + "".join(f'[{i},"m",{{"label":"m{i}"}}]\n' for i in range(2000))).encode()
    )
    cut.write_bytes(full[: len(full) // 2])
    got = read_recording(cut)
    labels = [e.label for e in got.events]
    assert labels == [f"m{i}" for i in range(len(labels))]
    assert 0 < len(labels) < 2000
    assert got.problems and "torn" in got.problems[-1].message


def test_gpu_readings_of_the_wrong_type_are_reported_not_replayed(tmp_path):
    # A GPU reading with text where numbers belong must not reach the session state: its
    # snapshot (the UI's only input) would raise on it.
    from specmon.core.session_state import SessionState

    path = tmp_path / "s.ndjson"
    good = {"index": 0, "name": "GPU A", "temperature_c": 61.0, "memory_used_bytes": 1024}
    _write(
        path,
        HEADER,
        json.dumps([0.1, "g", {"src": "nvml", "gpus": [good]}]),
        json.dumps([0.2, "g", {"src": "nvml", "gpus": [{"index": 0, "temperature_c": "hot"}]}]),
        json.dumps([0.3, "g", {"src": "nvml", "gpus": [{"index": 0, "power_w": True}]}]),
        json.dumps([0.4, "g", {"src": "nvml", "gpus": [{"index": 0, "memory_used_bytes": "1"}]}]),
        json.dumps([0.5, "g", {"src": "nvml", "gpus": [{"index": 0, "name": 7}]}]),
        json.dumps([0.6, "g", {"src": "nvml", "gpus": [{"index": 0, "clock_event_reasons": 5}]}]),
    )
    rec = read_recording(path)
    assert [p.line for p in rec.problems] == [3, 4, 5, 6, 7]
    state = SessionState(rec.info)
    for event in rec.events:
        state.apply(event)
    gpus = state.snapshot()["gpu"]["gpus"]
    assert gpus[0]["temperature_c"] == 61.0
    assert gpus[0]["memory_used_bytes"] == 1024


def test_a_player_closes_its_file_when_closed_or_run(tmp_path):
    import asyncio
    import gc

    from specmon.sources.recording_player import RecordingPlayer

    path = tmp_path / "s.ndjson"
    path.write_text(
        '{"format": "specmon-session", "version": 1}\n[0.5, "m", {"label": "x"}]\n',
        encoding="utf-8",
    )
    fds = set(os.listdir("/proc/self/fd"))
    gc.disable()  # closing must not depend on the garbage collector
    try:
        never_run = RecordingPlayer(path)
        never_run.close()
        ran = RecordingPlayer(path)
        got: list = []
        assert asyncio.run(ran.run(got.append)) == 1
        assert set(os.listdir("/proc/self/fd")) <= fds
    finally:
        gc.enable()
