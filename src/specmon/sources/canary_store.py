"""The canary baselines, stored per server + model + draft + method + K.

The file is `$XDG_DATA_HOME/specmon/canary.json` (default `~/.local/share/specmon/canary.json`,
next to the vanilla baselines):

    {"format": "specmon-canary", "version": 1,
     "baselines": {"<key>": {"probes": [3.41, 3.38, ...], "live": [2.9, ...]}}}

where `<key>` is `core.canary.CanaryKey.id()` (a JSON list: server, model, draft, method, K). The
server is stored as its base URL with any credentials removed (core.redaction.redact_url). Writes
are atomic (sources.baseline_store's way). A file that is not this format raises
CanaryStoreError naming it, and is never overwritten; one bad entry is skipped (and named in
`skipped`, for the caller to say so), the others kept. Every AL is held to one rule
(core.canary.al_problem: 1 to K + 1 for the key's K) when it is read and before it is written, so
the store never writes a value it would refuse the next time. At most MAX_ENTRIES keys are kept
(the oldest written first out).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specmon.core.canary import CanaryBaseline, CanaryKey, n_spec_of_key
from specmon.sources.data_files import data_path, read_at_most, write_atomic

FORMAT = "specmon-canary"
VERSION = 1
MAX_ENTRIES = 256
MAX_FILE_BYTES = 4 * 1024 * 1024


class CanaryStoreError(Exception):
    """The canary file cannot be read or written; the message names the file and the problem."""


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/specmon/canary.json`, with XDG's default `~/.local/share`."""
    return data_path("canary.json", env)


class CanaryStore:
    """Read and write the canary baselines."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_path()
        self.skipped: dict[str, str] = {}
        """The entries the last load skipped: key -> why (one line naming the file)."""

    def load(self) -> dict[str, CanaryBaseline]:
        """Every stored baseline by key ({} when the file does not exist yet)."""
        self.skipped = {}
        try:
            raw = read_at_most(self.path, MAX_FILE_BYTES)
        except OSError as exc:
            raise CanaryStoreError(f"cannot read the canary file {self.path}: {exc}") from None
        if raw is None:
            return {}
        if len(raw) > MAX_FILE_BYTES:
            raise CanaryStoreError(
                f"the canary file {self.path} is over {MAX_FILE_BYTES // 2**20} MiB; "
                "it was left as it is: move it away"
            )
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise CanaryStoreError(
                f"the canary file {self.path} is not valid JSON ({exc}); it was left as it "
                "is: fix it or move it away"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CanaryStoreError(
                f'the canary file {self.path} is not a specmon canary file (no "format": '
                f'"{FORMAT}"); it was left as it is: fix it or move it away'
            )
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
            raise CanaryStoreError(
                f"the canary file {self.path} has version {version!r:.20}; this specmon reads "
                f"version {VERSION} (a newer specmon wrote it?)"
            )
        items = data.get("baselines", {})
        if not isinstance(items, dict):
            raise CanaryStoreError(f"{self.path}: 'baselines' is not an object")
        out: dict[str, CanaryBaseline] = {}
        for key, value in items.items():
            try:
                out[key] = CanaryBaseline.from_json(value, n_spec_of_key(key))
            except ValueError as exc:
                self.skipped[key] = f"{self.path}: entry {key!r:.80} skipped: {exc}"
        return out

    def get(self, key: CanaryKey) -> CanaryBaseline:
        """The stored baseline of `key` (an empty one when none is stored)."""
        return self.load().get(key.id(), CanaryBaseline())

    def put(self, key: CanaryKey, baseline: CanaryBaseline) -> None:
        """Store (or replace) the baseline of `key`, atomically (kept last: newest).
        CanaryStoreError, and nothing written, when the baseline holds a value the loader would
        refuse (an AL that is not one for the key's K)."""
        why = baseline.problem(key.n_spec)
        if why is not None:
            raise CanaryStoreError(f"the canary baseline was not written to {self.path}: {why}")
        items = self.load()
        items.pop(key.id(), None)
        items[key.id()] = baseline
        kept = list(items.items())[-MAX_ENTRIES:]
        payload: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "baselines": {k: b.to_json() for k, b in kept},
        }
        self._write_atomic(json.dumps(payload, indent=1) + "\n")

    def forget(self, key: CanaryKey) -> bool:
        """Remove the baseline of `key` (to learn it again); whether there was one."""
        items = self.load()
        if items.pop(key.id(), None) is None:
            return False
        payload = {
            "format": FORMAT,
            "version": VERSION,
            "baselines": {k: b.to_json() for k, b in items.items()},
        }
        self._write_atomic(json.dumps(payload, indent=1) + "\n")
        return True

    def _write_atomic(self, text: str) -> None:
        try:
            write_atomic(self.path, text)
        except OSError as exc:
            raise CanaryStoreError(f"cannot write the canary file {self.path}: {exc}") from None
