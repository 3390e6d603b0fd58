"""`--redact REGEX` (docs/recording-format.md): a recording keeps the model's text verbatim, so a
key the model echoes would be in the file; the patterns are applied to answer text before it is
written, across chunk boundaries, and nothing of the answer is lost."""

from __future__ import annotations

import argparse
import logging
import random

import pytest

from specmon.cli.session_setup import add_redact_argument
from specmon.core.clock import FakeClock
from specmon.core.events import RequestEnded, RequestStarted, SessionInfo, StreamChunk
from specmon.core.redaction import (
    REDACT_TIMED_OUT,
    REDACTED,
    RedactPatternError,
    Scrubber,
    StreamRedactor,
    compile_redactions,
)
from specmon.runtime.recorder import Recorder
from specmon.sources.recording_player import read_recording

KEY = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
PATTERN = r"sk-live-[A-Za-z0-9]{16,}"


def chunks_of(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 6)
        out.append(text[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("seed", range(20))
def test_a_key_split_over_many_chunks_is_found_whole(seed):
    text = f"Sure. Your key is {KEY}, and again:{KEY}\nDone. " + "x" * 300
    redactor = StreamRedactor(compile_redactions([PATTERN]))  # type: ignore[arg-type]
    written = [redactor.feed(part) for part in chunks_of(text, seed)]
    written.append(redactor.feed("", final=True))
    whole = "".join(written)
    assert whole == text.replace(KEY, REDACTED)
    # Text is never written before it arrived: what is out after n pieces is a prefix of the
    # redacted text of those n pieces.
    assert KEY[8:20] not in whole


def test_held_text_is_bounded_and_plain_text_passes():
    redactor = StreamRedactor(compile_redactions([PATTERN]), hold=16)  # type: ignore[arg-type]
    out = "".join(redactor.feed("abcdefgh") for _ in range(100))
    assert len(redactor.pending) <= 16
    assert out + redactor.feed("", final=True) == "abcdefgh" * 100


@pytest.mark.parametrize(
    ("patterns", "message"),
    [(["("], "missing"), ([""], "non-empty"), (["a*"], "matches empty"), (["x"] * 33, "at most")],
)
def test_a_bad_pattern_is_refused(patterns, message):
    with pytest.raises(RedactPatternError, match=message):
        compile_redactions(patterns)


def test_the_option_is_repeatable_and_checked_by_the_parser(capsys):
    parser = argparse.ArgumentParser()
    add_redact_argument(parser)
    assert parser.parse_args(["--redact", "a+", "--redact", "b+"]).redact == ["a+", "b+"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--redact", "("])
    assert "--redact" in capsys.readouterr().err


def _record(tmp_path, events, *, redact=(PATTERN,)):
    path = tmp_path / "r.ndjson"
    with Recorder(path, SessionInfo(), clock=FakeClock(), redact=redact) as rec:
        for event in events:
            rec.write(event)
    return path, read_recording(path)


def _answer(rid: str, text: str, *, finish: bool, t0: float = 1.0) -> list:
    parts = chunks_of(text, 3)
    events: list = [RequestStarted(t=t0, request_id=rid, source="http://s", model="m")]
    for n, part in enumerate(parts):
        last = finish and n == len(parts) - 1
        events.append(
            StreamChunk(
                t=t0 + 0.01 * (n + 1),
                request_id=rid,
                text=part,
                completion_tokens=n + 1,
                finish_reason="stop" if last else None,
            )
        )
    end_t = t0 + 0.01 * (len(parts) + 1)
    events.append(RequestEnded(t=end_t, request_id=rid, outcome="ok" if finish else "failed"))
    return events


def test_a_recording_with_redact_holds_no_key_and_the_whole_answer(tmp_path):
    text = f"The key is {KEY} - keep it."
    events = _answer("r1", text, finish=True) + _answer("r2", text, finish=False, t0=2.0)
    path, recording = _record(tmp_path, events)
    assert KEY not in path.read_text()
    assert "sk-live-" not in path.read_text()
    for rid in ("r1", "r2"):
        chunks = [e for e in recording.events if isinstance(e, StreamChunk) and e.request_id == rid]
        assert "".join(c.text for c in chunks) == text.replace(KEY, REDACTED)
    # The finished answer keeps its chunks one for one, with their times and token counts.
    sent = [e for e in events if isinstance(e, StreamChunk) and e.request_id == "r1"]
    kept = [e for e in recording.events if isinstance(e, StreamChunk) and e.request_id == "r1"]
    assert [(c.t, c.completion_tokens) for c in kept] == [(c.t, c.completion_tokens) for c in sent]
    # The cut one: its held text comes as one more chunk at its end, with no new token.
    cut = [e for e in recording.events if isinstance(e, StreamChunk) and e.request_id == "r2"]
    ended = next(
        e for e in recording.events if isinstance(e, RequestEnded) and e.request_id == "r2"
    )
    assert cut[-1].t == ended.t and cut[-1].completion_tokens == cut[-2].completion_tokens
    times = [e.t for e in recording.events]
    assert times == sorted(times)  # the file stays in time order


def test_without_redact_the_model_text_is_verbatim(tmp_path):
    """What docs/recording-format.md says: model text is data, kept as it came."""
    path, _ = _record(tmp_path, _answer("r1", f"key {KEY}", finish=True), redact=())
    assert KEY not in path.read_text()  # the chunks split it: no chunk holds it whole
    joined = "".join(e.text for e in read_recording(path).events if isinstance(e, StreamChunk))
    assert joined == f"key {KEY}"


# ---------------------------------------------------------------- patterns, each on its own


@pytest.mark.timeout(60)
def test_a_pattern_that_backtracks_without_end_cannot_freeze_the_stream(tmp_path, caplog):
    """`(a|aa)+b` against a run of `a`s backtracks for ever with Python's re: the matching is
    bounded, the answer is written as one marker (never raw) and one warning line is given,
    once, however many texts it happens on."""
    text = "a" * 320 + f" {KEY}"
    events = _answer("r1", text, finish=True) + _answer("r2", text, finish=True, t0=2.0)
    with caplog.at_level(logging.WARNING, logger="specmon.core.redaction"):
        path, recording = _record(tmp_path, events, redact=(r"(a+)+b", r"(a|aa)+b", PATTERN))
    raw = path.read_text()
    assert "a" * 40 not in raw and "sk-live-" not in raw
    for rid in ("r1", "r2"):
        chunks = [e for e in recording.events if isinstance(e, StreamChunk) and e.request_id == rid]
        assert "".join(c.text for c in chunks) == REDACT_TIMED_OUT
    warnings = [r.getMessage() for r in caplog.records]
    # the patterns share one deadline per text: which one it runs out in depends on how the
    # machine schedules the matching ((a+)+b is fast with the regex package, but not on a
    # loaded machine), so the warning names either of the two that can backtrack
    assert len(warnings) == 1
    assert "'(a|aa)+b'" in warnings[0] or "'(a+)+b'" in warnings[0]


@pytest.mark.timeout(60)
def test_the_pathological_pattern_on_a_whole_text_returns_the_marker():
    patterns = compile_redactions([r"(a+)+b", r"(a|aa)+b"])
    assert patterns is not None
    assert Scrubber(patterns=patterns).data("a" * 320) == REDACT_TIMED_OUT
    assert patterns.sub("no run here") == "no run here"


def test_a_global_flag_in_a_later_pattern_works():
    """`(?i)` at the start of the second pattern is no longer in the middle of a joined one."""
    patterns = compile_redactions(["foo", "(?i)secret"])
    assert patterns is not None
    assert patterns.sub("a SECRET and a Secret, foo") == "a [REDACTED] and a [REDACTED], [REDACTED]"


def test_patterns_may_use_the_same_group_names():
    patterns = compile_redactions([r"(?P<k>sk-[a-z]{6})", r"(?P<k>pw-[0-9]{4})"])
    assert patterns is not None
    assert patterns.sub("sk-abcdef pw-1234") == "[REDACTED] [REDACTED]"


def test_a_backreference_in_a_later_pattern_refers_to_its_own_group():
    patterns = compile_redactions([r"(sk)-[a-z]{8}", r"(['\"])hunter2\1"])
    assert patterns is not None
    assert patterns.sub("""pw 'hunter2' and "hunter2" """) == "pw [REDACTED] and [REDACTED] "


def test_overlapping_matches_of_two_patterns_are_one_redaction():
    patterns = compile_redactions([r"abc-\d+", r"\d+-xyz"])
    assert patterns is not None
    assert patterns.sub("id abc-123-xyz end") == "id [REDACTED] end"


@pytest.mark.parametrize(
    ("pattern", "words"),
    [("(", "missing )"), ("a{2,1}", "min repeat greater than max repeat"), ("(?P<1x>a)", "bad")],
)
def test_a_bad_pattern_is_one_line_naming_it_at_start(capsys, pattern, words):
    from specmon.cli.main import main

    argv = ["chat", "--attach", "http://127.0.0.1:9", "--redact", "ok", "--redact", pattern]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"specmon chat: error: argument --redact: {pattern!r}: ")
    assert words in err[0] and len(err) == 2 and "Traceback" not in err[0]
