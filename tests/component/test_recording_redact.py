"""`--redact REGEX` (issue 17): a recording keeps the model's text verbatim, so a key the model
echoes would be in the file; the patterns are applied to answer text before it is written, across
chunk boundaries, and nothing of the answer is lost."""

from __future__ import annotations

import argparse
import random

import pytest

from specmon.cli.session_setup import add_redact_argument
from specmon.core.clock import FakeClock
from specmon.core.events import RequestEnded, RequestStarted, SessionInfo, StreamChunk
from specmon.core.redaction import (
    REDACTED,
    RedactPatternError,
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
