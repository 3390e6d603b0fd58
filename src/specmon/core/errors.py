"""specmon's error hierarchy: every error specmon raises on purpose derives from `SpecmonError`,
so a command can report any of them as one line.

- `RecordingError`: a recording that cannot be written (created) or read (replayed); the message
  names the file and the reason. `runtime.recorder.RecordingExistsError` and
  `core.recording_format.RecordingFormatError` (one bad header or event line) are kinds of it.
- errors of untrusted input that is refused (a /metrics page, a per-request object, a simulator
  setting) derive from `SpecmonError` and `ValueError`.
"""

from __future__ import annotations


class SpecmonError(Exception):
    """Base of the errors specmon raises on purpose."""


class RecordingError(SpecmonError):
    """A recording that cannot be created, written or replayed (the message says why)."""


class RecordingFormatError(RecordingError, ValueError):
    """A header or event line of a recording that cannot be read (the message says what)."""
