"""The sweep's per-batch-size schedule as the file vLLM reads: `specmon sweep --emit-vllm-dynamic`.

vLLM's dynamic speculative decoding takes a `num_speculative_tokens_per_batch_size` key in its
speculative config (`--speculative-config JSON`): a list of `[range_start, range_end, k]`,
inclusive batch-size ranges. vLLM's reader (`vllm/v1/spec_decode/dynamic/utils.py`,
`validate_and_normalize_dynamic_sd_schedule` and `build_dynamic_sd_schedule_lookup`) accepts a
non-empty list of 3-item entries of integers with positive bounds, start <= end and k >= 0,
sorted by start without overlap, the first starting at batch size 1. At run time the scheduler
looks the step's batch size up in a dense table: the k of the range that holds it, a gap or the
tail past the last range taking the previous range's k, every k clamped to the config's
`num_speculative_tokens` (which must be > 0).

This module writes the whole speculative config (method, draft model, `num_speculative_tokens` =
the largest k of the schedule, the schedule, and the sweep's other speculative options), so that
`vllm serve MODEL --speculative-config "$(cat FILE)"` runs the schedule as specmon measured it.
When the sweep attached to servers and does not know the method, the file holds the schedule's
two keys only, and the note says to merge them into the server's own speculative config.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from specmon.bench.config import ConfigError
from specmon.bench.limits import MAX_N_SPEC
from specmon.bench.sweep import SweepSummary
from specmon.core.per_batch_k import SCHEDULE_KEY, ScheduleError, check_schedule
from specmon.sources.data_files import new_file_mode, write_atomic


def dynamic_config(summary: SweepSummary) -> dict[str, Any]:
    """The speculative config (or, without a known method, its two schedule keys) for the
    summary's schedule; ScheduleError when there is none to write."""
    schedule = summary.schedule
    if schedule is None:
        raise ScheduleError(
            "no per-batch-size schedule: it needs two or more --concurrency values, each with a "
            "measured throughput choice"
        )
    entries = check_schedule(schedule)
    top = max(k for *_, k in entries)
    if top > MAX_N_SPEC:  # the sweep measures n_spec 0..64: a larger k is not a measurement
        raise ScheduleError(
            f"the schedule's k {top} is above {MAX_N_SPEC}, the largest num_speculative_tokens "
            "a sweep measures"
        )
    if top == 0:
        raise ScheduleError(
            "n_spec 0 (vanilla) was the fastest at every measured concurrency: serve without "
            "--speculative-config (vLLM refuses num_speculative_tokens 0)"
        )
    identity = summary.identity
    config: dict[str, Any] = {}
    if identity.method is not None:
        config["method"] = identity.method
        if identity.draft_model:
            config["model"] = identity.draft_model
    config["num_speculative_tokens"] = top
    config[SCHEDULE_KEY] = [list(e) for e in entries]
    if identity.method is not None:
        for key, value in identity.extra.items():
            config.setdefault(key, value)
    return config


def write_dynamic_config(summary: SweepSummary, path: str | os.PathLike[str]) -> str:
    """Write the file (atomically, data_files.write_atomic: a temporary file renamed over it)
    and return a one-line note for the user; ScheduleError or OSError when it cannot be
    written."""
    config = dynamic_config(summary)
    target = Path(path)
    write_atomic(target, json.dumps(config) + "\n", mode=new_file_mode())
    sim = " (from SIMULATED measurements)" if summary.simulated else ""
    if "method" in config:
        return (
            f"wrote {target}{sim}: serve with "
            f'vllm serve MODEL --speculative-config "$(cat {target})"'
        )
    return (
        f"wrote {target}{sim}: the speculation method is not known for attached servers; merge "
        f"its two keys into the server's --speculative-config"
    )


def check_target(path: str) -> None:
    """Refuse at once (ConfigError, before any measurement) a target whose folder does not
    exist."""
    parent = Path(path).parent
    if not parent.is_dir():
        raise ConfigError(f"--emit-vllm-dynamic {path}: folder {parent} does not exist")
    if Path(path).is_dir():
        raise ConfigError(f"--emit-vllm-dynamic {path} is a folder, not a file")


def emit(summary: SweepSummary, path: str) -> tuple[bool, str]:
    """(written, message) for the command line: never raises for a bad target or schedule."""
    try:
        return True, write_dynamic_config(summary, path)
    except ScheduleError as exc:
        return False, f"no {path} written: {exc}"
    except OSError as exc:
        return False, f"no {path} written: {exc.strerror or exc}"
