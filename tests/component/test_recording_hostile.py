"""Hostile recordings (sources/recording_player.py, core/recording_format.py): impossible event
times, non-finite numbers, devices and FIFOs, over-long lines and gzip bombs, deep nesting. Each
is refused or stops the reading at the line named, keeping every event before it, in bounded
memory (docs/recording-format.md, "Limits")."""

from __future__ import annotations

import gzip
import json
import os
import tracemalloc
from pathlib import Path

import pytest

from specmon.cli.main import main
from specmon.core.errors import RecordingError
from specmon.core.recording_format import MAX_BACKWARD_S, MAX_JUMP_S
from specmon.sources import recording_player
from specmon.sources.recording_player import MAX_LINE_BYTES, read_recording

HEADER = '{"format":"specmon-session","version":1}'


def _marker(t: object, label: str) -> str:
    return f'[{t},"m",{{"label":"{label}"}}]'


def _write(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def _labels(path: Path) -> list[str]:
    return [e.label for e in read_recording(path).events]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("bad_t", "why"),
    [
        ("1e308", "jumps"),
        ("1e400", "not a finite number"),  # json reads it as inf
        ("Infinity", "not a finite number"),
        ("-Infinity", "not a finite number"),
        ("NaN", "not a finite number"),
        (str(2.0 - MAX_BACKWARD_S - 1.0), "goes back"),
        (str(2.0 + MAX_JUMP_S + 1.0), "jumps"),
    ],
)
def test_an_impossible_time_stops_the_reading_at_its_line(tmp_path, bad_t, why) -> None:
    path = _write(
        tmp_path / "t.ndjson",
        [HEADER, _marker(1.0, "a"), _marker(2.0, "b"), _marker(bad_t, "bad"), _marker(3.0, "c")],
    )
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a", "b"]  # type: ignore[attr-defined]
    [problem] = recording.problems
    assert problem.line == 4
    assert why in problem.message and "the rest of the recording is not read" in problem.message


def test_a_first_time_far_from_zero_is_refused_but_small_steps_back_are_kept(tmp_path) -> None:
    far = _write(tmp_path / "far.ndjson", [HEADER, _marker(MAX_JUMP_S + 1.0, "far")])
    assert _labels(far) == []
    # A log line or a marker stamped a little before the event written before it is normal.
    back = _write(
        tmp_path / "back.ndjson",
        [HEADER, _marker(100.0, "a"), _marker(100.0 - MAX_BACKWARD_S, "b"), _marker(101, "c")],
    )
    assert _labels(back) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "line",
    [
        '[1.5,"ms",{"src":"s","s":[["vllm:x",{},NaN]]}]',
        '[1.5,"ms",{"src":"s","s":[["vllm:x",{},1e400]]}]',
        '[1.5,"rs",{"id":"r","prompt_chars":Infinity}]',
        '[1.5,"rs",{"id":"r","max_tokens":-Infinity}]',
        '[1.5,"rs",{"id":"r","temperature":NaN}]',
        '[1.5,"g",{"src":"nvml","gpus":[{"index":0,"power_w":Infinity}]}]',
        '[1.5,"g",{"src":"nvml","gpus":[{"index":NaN}]}]',
    ],
)
def test_a_non_finite_number_in_an_event_skips_that_line_only(tmp_path, line) -> None:
    path = _write(tmp_path / "n.ndjson", [HEADER, _marker(1.0, "a"), line, _marker(2.0, "b")])
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a", "b"]  # type: ignore[attr-defined]
    [problem] = recording.problems
    assert problem.line == 3 and problem.message.startswith("skipped: ")


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_opening_it(tmp_path) -> None:
    fifo = tmp_path / "pipe.ndjson"
    os.mkfifo(fifo)
    with pytest.raises(RecordingError, match="not a regular file"):
        read_recording(fifo)


def test_a_device_is_refused(tmp_path) -> None:
    with pytest.raises(RecordingError, match="/dev/zero is not a regular file"):
        read_recording("/dev/zero")


def test_an_over_long_line_stops_the_reading_there(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(recording_player, "MAX_LINE_BYTES", 4096)
    long = '[1.5,"m",{"label":"' + "x" * 5000 + '"}]'
    for name in ("long.ndjson", "long.ndjson.gz"):
        path = _write(tmp_path / name, [HEADER, _marker(1.0, "a"), long, _marker(2.0, "b")])
        recording = read_recording(path)
        assert [e.label for e in recording.events] == ["a"]  # type: ignore[attr-defined]
        [problem] = recording.problems
        assert problem.line == 3 and "longer than" in problem.message


def test_an_over_long_header_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(recording_player, "MAX_LINE_BYTES", 4096)
    path = _write(tmp_path / "h.ndjson", ['{"format":"' + "x" * 5000 + '"}'])
    with pytest.raises(RecordingError, match=r"line 1 \(the header\) is longer than"):
        read_recording(path)


def test_a_gzip_bomb_is_read_in_bounded_memory(tmp_path) -> None:
    # A small .gz holding one line four times the cap: the reader stops at the cap and never
    # holds the whole line (nor a whole decompressed block) in memory.
    bomb = tmp_path / "bomb.ndjson.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write((HEADER + "\n" + _marker(1.0, "a") + "\n").encode())
        piece = b"0" * (1 << 20)
        for _ in range(4 * MAX_LINE_BYTES // len(piece)):
            f.write(piece)
        f.write(b"\n" + _marker(2.0, "b").encode() + b"\n")
    assert bomb.stat().st_size < MAX_LINE_BYTES // 100
    tracemalloc.start()
    try:
        recording = read_recording(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [e.label for e in recording.events] == ["a"]  # type: ignore[attr-defined]
    assert [p.line for p in recording.problems] == [3]
    assert peak < 3 * MAX_LINE_BYTES


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_nesting_skips_the_line_with_its_number(tmp_path, depth) -> None:
    deep = "[" * depth + "]" * depth
    path = _write(tmp_path / "d.ndjson", [HEADER, _marker(1.0, "a"), deep, _marker(2.0, "b")])
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a", "b"]  # type: ignore[attr-defined]
    [problem] = recording.problems
    assert problem.line == 3 and "nested" in problem.message


def test_brackets_inside_strings_are_not_nesting(tmp_path) -> None:
    label = "[[[{{{" * 50 + '\\"' + "]]]" * 50
    path = _write(tmp_path / "s.ndjson", [HEADER, _marker(1.0, label)])
    assert _labels(path) == [json.loads(f'"{label}"')]


def test_a_deeply_nested_header_is_refused(tmp_path) -> None:
    path = _write(tmp_path / "h.ndjson", ['{"extra":' + "[" * 100_000 + "]" * 100_000 + "}"])
    with pytest.raises(RecordingError, match=r"line 1 \(the header\) is not JSON"):
        read_recording(path)


@pytest.mark.parametrize(
    "line",
    [
        '[1.5,"re",{"id":"r","completion_tokens":1' + "0" * 400 + "}]",
        '[1.5,"re",{"id":"r","prompt_tokens":-1' + "0" * 400 + "}]",
        '[1.5,"rs",{"id":"r","prompt_chars":1' + "0" * 400 + "}]",
        '[1.5,"c",{"id":"r","n":1' + "0" * 400 + "}]",
    ],
)
def test_a_huge_integer_in_an_event_skips_that_line_only(tmp_path, line) -> None:
    # 10**400 overflows a float: the fold used to die of OverflowError on it.
    path = _write(tmp_path / "i.ndjson", [HEADER, _marker(1.0, "a"), line, _marker(2.0, "b")])
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a", "b"]  # type: ignore[attr-defined]
    [problem] = recording.problems
    assert problem.line == 3 and "out of range" in problem.message


def test_a_huge_integer_time_stops_the_reading(tmp_path) -> None:
    path = _write(tmp_path / "t.ndjson", [HEADER, _marker(1.0, "a"), _marker("1" + "0" * 400, "x")])
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a"]  # type: ignore[attr-defined]
    assert [p.line for p in recording.problems] == [3]


@pytest.mark.parametrize("n_spec", ["1000000000000", "-5", "1" + "0" * 400, "8.5", '"8"'])
def test_a_header_n_spec_out_of_range_is_unknown_with_a_notice(tmp_path, n_spec) -> None:
    # A huge n_spec made the fold loop over every position (a replay that never ended).
    header = '{"format":"specmon-session","version":1,"n_spec":' + n_spec + "}"
    recording = read_recording(_write(tmp_path / "n.ndjson", [header, _marker(1.0, "a")]))
    assert recording.info.n_spec is None
    assert len(recording.events) == 1
    [problem] = recording.problems
    assert problem.line == 1 and "n_spec" in problem.message and "ignored" in problem.message


@pytest.mark.parametrize(
    "value", ["0", "-133.6", "1e400", "1e9", '"133.6"', "true", "[133.6]", "{}", "NaN"]
)
def test_a_header_baseline_that_is_not_a_speed_is_ignored_with_a_notice(
    tmp_path, capsys, value
) -> None:
    # The header's vanilla baseline is untrusted: a replay must not judge answers against it.
    header = (
        '{"format":"specmon-session","version":1,"model":"m","simulated":true,'
        '"baseline_tok_s":' + value + ',"baseline_from":"given"}'
    )
    path = _write(tmp_path / "b.ndjson", [header, _marker(1.0, "a")])
    recording = read_recording(path)
    assert recording.baseline is None
    assert len(recording.events) == 1
    assert main(["replay", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["session"]["baseline_tok_s"] is None
    [line] = captured.err.splitlines()
    assert str(path) in line and "baseline_tok_s" in line and "ignored" in line


def test_a_header_baseline_and_an_unknown_source_are_kept(tmp_path) -> None:
    header = (
        '{"format":"specmon-session","version":1,"baseline_tok_s":133.6,'
        '"baseline_from":"somewhere"}'
    )
    recording = read_recording(_write(tmp_path / "b.ndjson", [header, _marker(1.0, "a")]))
    assert recording.baseline is not None
    assert (recording.baseline.tok_s, recording.baseline.source) == (133.6, None)
    assert recording.problems == []


def test_a_recording_without_a_baseline_replays_without_one(tmp_path, capsys) -> None:
    header = '{"format":"specmon-session","version":1,"model":"m","simulated":true}'
    path = _write(tmp_path / "old.ndjson", [header, _marker(1.0, "a")])
    assert read_recording(path).baseline is None
    assert main(["replay", str(path), "--json"]) == 0
    session = json.loads(capsys.readouterr().out)["session"]
    assert (session["baseline_tok_s"], session["baseline_from"]) == (None, None)


@pytest.mark.parametrize("filler", ["[1.0, broken", "", "   ", "# a comment"])
def test_too_many_skipped_lines_stop_the_reading(tmp_path, monkeypatch, filler) -> None:
    # A file of garbage lines (a newline bomb) costs bounded time and memory.
    monkeypatch.setattr(recording_player, "MAX_SKIPPED_LINES", 5)
    lines = [HEADER, _marker(1.0, "a"), *[filler] * 6, _marker(2.0, "b")]
    recording = read_recording(_write(tmp_path / "g.ndjson", lines))
    assert [e.label for e in recording.events] == ["a"]  # type: ignore[attr-defined]
    stop = recording.problems[-1]
    assert stop.line == 8 and "more than 5 lines skipped" in stop.message  # the 6th
    assert len(recording.problems) <= 6


def test_gzip_data_expanding_like_a_bomb_stops_the_reading(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(recording_player, "GZIP_RATIO_FROM", 1 << 20)
    line = (_marker(1.0, "x") + "\n").encode()
    bomb = tmp_path / "bomb.ndjson.gz"
    bomb.write_bytes(gzip.compress((HEADER + "\n").encode() + line * 200_000, compresslevel=9))
    recording = read_recording(bomb)
    assert 0 < len(recording.events) < 200_000
    [problem] = recording.problems
    assert "gzip data expands more than" in problem.message
    # A real recording never comes near the ratio.
    sample = Path(__file__).resolve().parents[2] / "recordings" / "demo-cycle.ndjson.gz"
    assert read_recording(sample).problems == []


def test_a_skipped_line_does_not_move_the_time_check_on(tmp_path) -> None:
    # A bad line with a far (but allowed) time must not make the good lines after it "go back".
    bad = '[500000.0,"rs",{"id":"r","prompt_chars":"many"}]'
    path = _write(tmp_path / "s.ndjson", [HEADER, _marker(1.0, "a"), bad, _marker(2.0, "b")])
    recording = read_recording(path)
    assert [e.label for e in recording.events] == ["a", "b"]  # type: ignore[attr-defined]
    assert [p.line for p in recording.problems] == [3]
