"""Vanilla (n_spec = 0) decode baselines, stored per model + GPU + vLLM version.

The file is `$XDG_DATA_HOME/specmon/baselines.json` (default `~/.local/share/specmon/...`):

    {"format": "specmon-baselines", "version": 1,
     "baselines": [{"model": ..., "gpu": ..., "vllm_version": ..., "tok_s": 61.8,
                    "requests": 5, "recorded_at": "2026-11-22T02:40:00+00:00", "note": ""}]}

Writes are atomic (a temporary file in the same directory, fsync, then os.replace). A file that is
not valid JSON or not this format, larger than MAX_FILE_BYTES or not a regular file raises
BaselineStoreError naming the file and the problem, and is never overwritten: the user decides
(move it away or fix it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specmon.sources.data_files import data_path, read_at_most, write_atomic

FORMAT = "specmon-baselines"
VERSION = 1
MAX_FILE_BYTES = 4 * 1024 * 1024
"""The most of the file read (a baseline is about 200 bytes: tens of thousands fit)."""


class BaselineStoreError(Exception):
    """The baseline file cannot be read or written; the message names the file and the problem."""


@dataclass(frozen=True, slots=True)
class BaselineKey:
    """What a vanilla speed depends on. Unknown parts are stored as "" (and match only "")."""

    model: str
    gpu: str
    vllm_version: str


@dataclass(frozen=True, slots=True)
class Baseline:
    """One measured vanilla decode speed."""

    model: str
    gpu: str
    vllm_version: str
    tok_s: float
    requests: int | None = None
    recorded_at: str = ""
    note: str = ""

    @property
    def key(self) -> BaselineKey:
        return BaselineKey(self.model, self.gpu, self.vllm_version)


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/specmon/baselines.json`, with XDG's default `~/.local/share`."""
    return data_path("baselines.json", env)


def _baseline_from(item: Any, path: Path, index: int) -> Baseline:
    where = f"{path}: baseline #{index + 1}"
    if not isinstance(item, dict):
        raise BaselineStoreError(f"{where} is not an object")
    try:
        tok_s = item["tok_s"]
        if isinstance(tok_s, bool) or not isinstance(tok_s, int | float):
            raise TypeError("tok_s is not a number")
        if not math.isfinite(tok_s) or tok_s <= 0:
            raise ValueError(f"tok_s {tok_s!r} is not a positive number")
        requests = item.get("requests")
        if requests is not None and (isinstance(requests, bool) or not isinstance(requests, int)):
            raise TypeError("requests is not an integer")
        fields = {}
        for name in ("model", "gpu", "vllm_version", "recorded_at", "note"):
            value = item.get(name, "")
            if not isinstance(value, str):
                raise TypeError(f"{name} is not a string")
            fields[name] = value
    except KeyError as exc:
        raise BaselineStoreError(f"{where} has no {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise BaselineStoreError(f"{where}: {exc}") from None
    return Baseline(tok_s=float(tok_s), requests=requests, **fields)


class BaselineStore:
    """Read and write the baseline file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_path()

    def load(self) -> list[Baseline]:
        """Every stored baseline ([] when the file does not exist yet)."""
        try:
            raw = read_at_most(self.path, MAX_FILE_BYTES)
            if raw is None:
                return []
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineStoreError(f"cannot read the baseline file {self.path}: {exc}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise BaselineStoreError(
                f"the baseline file {self.path} is over {MAX_FILE_BYTES // 2**20} MiB; "
                "it was left as it is: move it away"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BaselineStoreError(
                f"the baseline file {self.path} is not valid JSON (line {exc.lineno}, column "
                f"{exc.colno}: {exc.msg}); it was left as it is: fix it or move it away"
            ) from None
        except RecursionError:
            raise BaselineStoreError(
                f"the baseline file {self.path} is not valid JSON (nested too deep); it was left "
                "as it is: fix it or move it away"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BaselineStoreError(
                f"the baseline file {self.path} is not a specmon baseline file (no "
                f'"format": "{FORMAT}"); it was left as it is: fix it or move it away'
            )
        version = data.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise BaselineStoreError(
                f"the baseline file {self.path} has version {version!r}; this specmon reads "
                f"version {VERSION} (a newer specmon wrote it?)"
            )
        items = data.get("baselines", [])
        if not isinstance(items, list):
            raise BaselineStoreError(f"{self.path}: 'baselines' is not a list")
        return [_baseline_from(item, self.path, i) for i, item in enumerate(items)]

    def get(self, key: BaselineKey) -> Baseline | None:
        """The baseline stored for exactly this model + GPU + vLLM version, or None."""
        for b in self.load():
            if b.key == key:
                return b
        return None

    def put(self, baseline: Baseline) -> None:
        """Store (or replace) the baseline of its key, atomically."""
        if not math.isfinite(baseline.tok_s) or baseline.tok_s <= 0:
            raise ValueError(f"a baseline must be a positive speed (got {baseline.tok_s!r})")
        items = [b for b in self.load() if b.key != baseline.key]
        items.append(baseline)
        payload = {
            "format": FORMAT,
            "version": VERSION,
            "baselines": [asdict(b) for b in items],
        }
        self._write_atomic(json.dumps(payload, indent=2, sort_keys=True) + "\n")

    def _write_atomic(self, text: str) -> None:
        try:
            write_atomic(self.path, text)
        except OSError as exc:
            raise BaselineStoreError(f"cannot write the baseline file {self.path}: {exc}") from None
