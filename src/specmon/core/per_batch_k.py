"""vLLM's per-batch-size speculation schedule (`num_speculative_tokens_per_batch_size`): the rules
its reader applies, and the k it uses at a batch size. Shared by host mode's `--n-spec-per-batch`
and `specmon sweep --emit-vllm-dynamic` (bench/vllm_dynamic.py, where the reader is described).
Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


class ScheduleError(ValueError):
    """A schedule vLLM's reader would refuse, or none to write; str() is the one-line reason."""


def check_schedule(schedule: object) -> list[tuple[int, int, int]]:
    """The schedule as vLLM's reader accepts it, sorted by start; ScheduleError otherwise."""
    if not isinstance(schedule, list) or not schedule:
        raise ScheduleError(f"{SCHEDULE_KEY} must be a non-empty list of [start, end, k]")
    entries: list[tuple[int, int, int]] = []
    for entry in schedule:
        if not isinstance(entry, list | tuple) or len(entry) != 3:
            raise ScheduleError(f"{SCHEDULE_KEY} entry {entry!r} is not [start, end, k]")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in entry):
            raise ScheduleError(f"{SCHEDULE_KEY} entry {entry!r} holds a value that is no integer")
        start, end, k = entry
        if start <= 0 or end <= 0 or start > end or k < 0:
            raise ScheduleError(
                f"{SCHEDULE_KEY} entry {entry!r}: need 1 <= start <= end and k >= 0"
            )
        entries.append((start, end, k))
    entries.sort(key=lambda e: e[0])
    if entries[0][0] != 1:
        raise ScheduleError(f"{SCHEDULE_KEY} must start at batch size 1, not {entries[0][0]}")
    for (_, end, _), (start, _, _) in itertools.pairwise(entries):
        if start <= end:
            raise ScheduleError(f"{SCHEDULE_KEY} ranges overlap at batch size {start}")
    return entries


def k_at(schedule: Sequence[Sequence[int]], batch_size: int, num_speculative_tokens: int) -> int:
    """The k vLLM's scheduler uses at `batch_size`: the k of the last range starting at or below
    it (a range's own, or carried over a gap or past the end), clamped to
    `num_speculative_tokens`."""
    entries = check_schedule([list(e) for e in schedule])
    k = next(k for start, _end, k in reversed(entries) if start <= batch_size)
    return min(k, num_speculative_tokens)
