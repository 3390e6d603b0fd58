"""specmon's files under the XDG data directory (`$XDG_DATA_HOME/specmon/`, default
`~/.local/share/specmon/`): where each one lives, reading one within a size bound (a regular file
only: a FIFO or device in its place is refused, never waited on), and writing one atomically (a
temporary file in the same directory, fsync, rename), so a crash or a full disk never leaves half
a file."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path


def data_path(name: str, env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/specmon/<name>`; XDG's default `~/.local/share` when the variable is
    unset, empty or relative (the spec says to ignore a relative one)."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "specmon" / name


def read_at_most(path: Path, limit: int) -> bytes | None:
    """At most `limit` + 1 bytes of `path` (more than `limit`: the caller's file is too large),
    None when it does not exist. OSError when it cannot be read or is not a regular file (opened
    without blocking and checked before any read, so a FIFO there cannot hold the caller)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise OSError("not a regular file (a directory, FIFO or device)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step; if it cannot (OSError, or text that does not
    encode), the old file stays as it was and no temporary file is left."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
