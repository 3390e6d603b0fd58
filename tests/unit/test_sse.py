"""The SSE decoder both stream clients share (core/sse.py) and the stream limits' words
(core/stream_limits.py): events split anywhere across reads give the same data, the SSE rules for
line ends, multi-line data, comments and a torn last event, the 1 MiB line cap."""

from __future__ import annotations

import argparse

import pytest

from specmon.cli.stream_args import add_stream_args, stream_limits_from
from specmon.core.sse import MAX_LINE_BYTES, SseDecoder, StreamLineTooLong
from specmon.core.stream_limits import StreamLimits, idle_message, idle_note

STREAM = (
    b": a comment\n"
    b'data: {"a": 1}\n\n'
    b'event: message\nid: 7\nretry: 10\ndata: {"b": 2}\n\n'
    b"data:no-space\n\n"
    b"data: first\ndata: second\n\n"
    b"\n\n"  # blank lines with no data dispatch nothing
    b"data: [DONE]\n\n"
)
EVENTS = [b'{"a": 1}', b'{"b": 2}', b"no-space", b"first\nsecond", b"[DONE]"]


def _decode(pieces: list[bytes]) -> tuple[list[bytes], SseDecoder]:
    decoder = SseDecoder()
    out: list[bytes] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    return out, decoder


def test_one_read_and_every_split_into_two_reads_give_the_same_events():
    assert _decode([STREAM])[0] == EVENTS
    for cut in range(1, len(STREAM)):
        assert _decode([STREAM[:cut], STREAM[cut:]])[0] == EVENTS, cut


def test_byte_by_byte_gives_the_same_events():
    out, decoder = _decode([STREAM[i : i + 1] for i in range(len(STREAM))])
    assert out == EVENTS and not decoder.pending


@pytest.mark.parametrize("end", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends_even_split_between_reads(end):
    stream = STREAM.replace(b"\n", end)
    assert _decode([stream])[0] == EVENTS
    for cut in range(1, len(stream)):
        assert _decode([stream[:cut], stream[cut:]])[0] == EVENTS, cut


def test_an_event_without_its_blank_line_is_not_dispatched():
    out, decoder = _decode([b'data: {"a": 1}\n\ndata: {"finish": "stop"}\n'])
    assert out == [b'{"a": 1}']
    assert decoder.pending  # the torn event is what the clients report


def test_a_line_over_the_cap_raises_holding_no_more_than_the_cap():
    decoder = SseDecoder()
    decoder.feed(b'data: {"a": ')
    block = b"x" * 65536
    fed = 0
    with pytest.raises(StreamLineTooLong, match=r"^stream line over 1 MiB$"):
        while fed < 4 * MAX_LINE_BYTES:
            decoder.feed(block)
            fed += len(block)
    assert fed <= MAX_LINE_BYTES
    assert len(decoder._buf) <= MAX_LINE_BYTES


def test_a_long_line_inside_one_read_and_many_short_data_lines_hit_the_cap_too():
    with pytest.raises(StreamLineTooLong):
        SseDecoder(limit=100).feed(b"data: " + b"y" * 200 + b"\n\n")
    with pytest.raises(StreamLineTooLong):
        SseDecoder(limit=100).feed(b"data: 0123456789\n" * 20)
    assert SseDecoder(limit=100).feed(b"data: " + b"y" * 90 + b"\n\n") == [b"y" * 90]


def test_idle_words_and_when_they_show():
    assert idle_message(60.0) == "no data from the server for 60 s"
    assert idle_message(0.3) == "no data from the server for 0.3 s"
    assert idle_note(1.0, 60.0) is None
    assert idle_note(12.4, 60.0) == "no data for 12 s — gives up at 60 s"
    assert idle_note(0.2, 1.0) == "no data for 0 s — gives up at 1 s"  # a short timeout: sooner


def test_limits_are_checked_and_max_tokens_bounds_the_tokens():
    limits = StreamLimits(max_answer_tokens=100)
    assert limits.token_limit(None) == 100
    assert limits.token_limit(7) == 7
    for bad in ({"idle_timeout_s": 0}, {"idle_timeout_s": float("inf")}, {"max_answer_bytes": 0}):
        with pytest.raises(ValueError):
            StreamLimits(**bad)


def test_the_cli_options_give_the_limits_and_refuse_nonsense():
    p = argparse.ArgumentParser(exit_on_error=False)
    add_stream_args(p)
    limits = stream_limits_from(
        p.parse_args(["--idle-timeout", "2.5", "--max-answer-bytes", "512KiB"])
    )
    assert limits == StreamLimits(idle_timeout_s=2.5, max_answer_bytes=512 << 10)
    assert stream_limits_from(p.parse_args([])) == StreamLimits()
    assert stream_limits_from(argparse.Namespace()) == StreamLimits()
    for argv in (["--idle-timeout", "0"], ["--idle-timeout", "nan"], ["--max-answer-bytes", "4GB"]):
        with pytest.raises(argparse.ArgumentError):
            p.parse_args(argv)
