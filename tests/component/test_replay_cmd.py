"""`specmon replay FILE [--speed X] [--json]` (cli/replay_cmd.py): the final snapshot, bad input
as one-line errors, torn and cut recordings replayed up to the tear with a notice."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from specmon.cli.main import main
from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.watch_json import snapshot_of
from specmon.sources.recording_player import read_recording
from specmon.ui.replay_app import recorded_label

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
HEALTHY = RECORDINGS / "healthy.ndjson.gz"


def _folded(path: Path) -> dict:
    recording = read_recording(path)
    state = SessionState(recording.info)
    for event in recording.events:
        state.apply(event)
    return snapshot_of(state.view())


def _replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["replay", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["healthy.ndjson.gz", "restart.ndjson.gz", "demo-cycle.ndjson.gz"])
def test_json_prints_the_watch_snapshot_of_the_whole_recording(name, capsys) -> None:
    code, out, err = _replay(capsys, str(RECORDINGS / name), "--json")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 1
    snapshot = json.loads(lines[0])
    assert snapshot["schema"] == "specmon-watch"
    assert snapshot == json.loads(json.dumps(_folded(RECORDINGS / name)))
    assert snapshot["simulated"] is True


def test_json_ignores_speed(capsys) -> None:
    # --json replays as fast as possible: a huge --speed or a tiny one gives the same at once.
    code, out, _ = _replay(capsys, str(HEALTHY), "--json", "--speed", "0.001")
    assert code == 0 and json.loads(out)["requests"]["summary"]["total"] == 12


def _one_line_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specmon replay: ")
    for w in words:
        assert w in lines[0]


def test_missing_recording(tmp_path, capsys) -> None:
    _one_line_error(*_replay(capsys, str(tmp_path / "absent.ndjson"), "--json"), "no such")


def test_not_a_recording(tmp_path, capsys) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\nworld\n")
    _one_line_error(*_replay(capsys, str(text), "--json"), "not a specmon recording")
    other = tmp_path / "other.ndjson"
    other.write_text('{"version": 2, "width": 80, "height": 24}\n[0.1, "o", "hi"]\n')
    _one_line_error(*_replay(capsys, str(other), "--json"), "not a specmon recording")
    fake_gz = tmp_path / "fake.ndjson.gz"
    fake_gz.write_text("plain text, not gzip\n")
    _one_line_error(*_replay(capsys, str(fake_gz), "--json"), "not a readable gzip recording")
    _one_line_error(*_replay(capsys, str(tmp_path), "--json"), "directory")


def test_newer_version(tmp_path, capsys) -> None:
    newer = tmp_path / "newer.ndjson"
    newer.write_text('{"format": "specmon-session", "version": 2}\n')
    _one_line_error(*_replay(capsys, str(newer), "--json"), "version 2 is newer", "upgrade")


def test_torn_recording_replays_up_to_the_tear_with_a_notice(tmp_path, capsys) -> None:
    raw = gzip.decompress(HEALTHY.read_bytes())
    cut = raw.index(b"\n", len(raw) // 2) + 20  # 20 bytes into a line
    torn_line = raw[:cut].count(b"\n") + 1
    torn = tmp_path / "torn.ndjson"
    torn.write_bytes(raw[:cut])
    code, out, err = _replay(capsys, str(torn), "--json")
    assert code == 0
    snapshot = json.loads(out)
    whole = raw[: raw.rindex(b"\n", 0, cut) + 1]
    (tmp_path / "whole.ndjson").write_bytes(whole)
    assert snapshot == json.loads(json.dumps(_folded(tmp_path / "whole.ndjson")))
    assert 0 < snapshot["requests"]["summary"]["total"] < 12
    (notice,) = err.strip().splitlines()
    assert f"torn.ndjson: line {torn_line}: torn last line" in notice


def test_gzip_truncated_recording_replays_what_was_flushed(tmp_path, capsys) -> None:
    data = HEALTHY.read_bytes()
    cut = tmp_path / "cut.ndjson.gz"
    cut.write_bytes(data[: len(data) // 2])
    code, out, err = _replay(capsys, str(cut), "--json")
    assert code == 0
    assert 0 < json.loads(out)["requests"]["summary"]["total"] < 12
    (notice,) = err.strip().splitlines()
    assert "cut.ndjson.gz: line " in notice and "torn last line" in notice


def test_bad_middle_line_is_skipped_with_a_notice(tmp_path, capsys) -> None:
    lines = gzip.decompress(HEALTHY.read_bytes()).split(b"\n")
    lines[5] = b"[1.0, broken"
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\n".join(lines))
    code, out, err = _replay(capsys, str(bad), "--json")
    assert code == 0 and json.loads(out)["requests"]["summary"]["total"] == 12
    assert "bad.ndjson: line 6: skipped" in err


def _strict_json(text: str) -> dict:
    """JSON as the standard defines it: NaN and Infinity are not in it."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON output")

    return json.loads(text, parse_constant=refuse)  # type: ignore[no-any-return]


@pytest.mark.parametrize("bad_t", ["Infinity", "NaN", "1e308", "-Infinity"])
def test_json_stops_at_an_impossible_time_and_stays_valid_json(tmp_path, capsys, bad_t) -> None:
    lines = gzip.decompress(HEALTHY.read_bytes()).split(b"\n")
    at = len(lines) // 2
    lines[at] = b"[" + bad_t.encode() + b', "m", {"label": "bad"}]'
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\n".join(lines))
    code, out, err = _replay(capsys, str(bad), "--json")
    assert code == 0
    snapshot = _strict_json(out)
    assert 0 < snapshot["requests"]["summary"]["total"] < 12  # what came before the line
    (notice,) = err.strip().splitlines()
    assert f"bad.ndjson: line {at + 1}: event time" in notice
    assert "the rest of the recording is not read" in notice


def test_many_bad_lines_are_one_notice_with_a_count(tmp_path, capsys) -> None:
    lines = gzip.decompress(HEALTHY.read_bytes()).split(b"\n")
    bad_lines = [b"[1.0, broken"] * 859
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\n".join([lines[0], *bad_lines, *lines[1:]]))
    code, out, err = _replay(capsys, str(bad), "--json")
    assert code == 0 and json.loads(out)["requests"]["summary"]["total"] == 12
    (notice,) = err.strip().splitlines()
    assert "bad.ndjson: 859 bad lines skipped (lines 2, 3, 4, 5, 6, …; line 2: " in notice


@pytest.mark.timeout(30)
@pytest.mark.parametrize("json_flag", [True, False])
def test_a_fifo_or_a_device_is_refused_in_one_line(tmp_path, capsys, json_flag) -> None:
    fifo = tmp_path / "pipe.ndjson"
    os.mkfifo(fifo)
    flags = ["--json"] if json_flag else []
    _one_line_error(*_replay(capsys, str(fifo), *flags), "not a regular file")
    _one_line_error(*_replay(capsys, "/dev/zero", *flags), "/dev/zero is not a regular file")


def test_bad_speed_is_an_argument_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["replay", str(HEALTHY), "--speed", "0"])
    assert info.value.code == 2
    assert "positive" in capsys.readouterr().err


def test_live_view_without_a_terminal_prints_recorded_lines(capsys) -> None:
    # The restart sample lasts ~9 s; at 1000x it replays in about 10 ms.
    before = set(threading.enumerate())
    code, out, err = _replay(capsys, str(RECORDINGS / "restart.ndjson.gz"), "--speed", "1000")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("[RECORDED · SIMULATED · ")
    assert "n_spec 8" in lines[0] and lines[0].endswith("restart.ndjson.gz")
    assert sum(1 for line in lines if line.startswith("[SIMULATED] r")) == 14
    assert set(threading.enumerate()) <= before  # the replay's hub thread is gone


def test_recorded_label() -> None:
    info = SessionInfo(
        server="http://gpu:8000",
        model="m",
        draft_model="d\x1b[31m",
        n_spec=8,
        simulated=False,
    )
    label = recorded_label(info, "2026-11-23T01:00:00+00:00")
    parts = ["RECORDED", "2026-11-23T01:00:00+00:00", "http://gpu:8000", "model m"]
    assert label == " · ".join([*parts, "draft d[31m", "n_spec 8"])
    assert recorded_label(SessionInfo(simulated=True), None) == "RECORDED · SIMULATED"
    assert "method ngram" in recorded_label(SessionInfo(method="ngram"), None)
    # the vanilla baseline the replay judges with, and where it came from
    with_baseline = recorded_label(
        SessionInfo(), None, baseline_tok_s=133.6, baseline_from="recording"
    )
    assert with_baseline == "RECORDED · vanilla 133.6 tok/s (recording)"


def test_register_is_free_of_heavy_imports() -> None:
    code = (
        "import sys, argparse\n"
        "from specmon.cli import replay_cmd\n"
        "replay_cmd.register(argparse.ArgumentParser().add_subparsers())\n"
        "heavy = ['textual', 'rich', 'httpx', 'asyncio', 'specmon.sources.recording_player']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": src, "PATH": ""},
    ).stdout
    assert out.strip() == "[]"
