"""The garbage-collection policy while answers stream: no full collection mid-answer, one
collection and a freeze once none streams (`hold` when an answer starts, `release` after its
last frame is painted). The count of answers streaming is kept here, for the whole process: the
collector is process-wide too."""

from __future__ import annotations

import gc

_streaming = 0
"""Answers streaming now (see `hold`)."""
_saved_threshold: tuple[int, int, int] | None = None


def hold() -> None:
    """An answer starts streaming: no full (oldest-generation) garbage collection until it ends.

    Measured on the chat benchmark at 5,000 tok/s: CPython's full collections walked every live
    object (Textual's, Rich's, the answer's lines) and took 100-200 ms each, six times in a
    3-second answer; they were the frames that painted late. Young collections still run (most
    cyclic garbage dies young). Textual pauses the collector during smooth scrolling for the
    same reason (`App.PAUSE_GC_ON_SCROLL`)."""
    global _streaming, _saved_threshold
    if _streaming == 0:
        _saved_threshold = gc.get_threshold()
        gc.set_threshold(_saved_threshold[0], _saved_threshold[1], 1_000_000)
    _streaming += 1


def release() -> None:
    """An answer ended (after its last frame is painted): when none streams any more, the
    collector's thresholds come back, one full collection runs, and what survives it is frozen
    (`gc.freeze`: the oldest objects are not walked by later full collections, so the next
    answer's pauses stay short)."""
    global _streaming, _saved_threshold
    if _streaming == 0:
        return
    _streaming -= 1
    if _streaming == 0 and _saved_threshold is not None:
        gc.set_threshold(*_saved_threshold)
        _saved_threshold = None
        gc.collect()
        gc.freeze()
