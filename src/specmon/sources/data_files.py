"""specmon's files under the XDG data directory (`$XDG_DATA_HOME/specmon/`, default
`~/.local/share/specmon/`; `state_path` for the XDG state directory): where each one lives,
reading one within a size bound (a regular file only: a FIFO or device in its place is refused,
never waited on), and writing one atomically (a temporary file in the same directory, fsync,
rename), so a crash or a full disk never leaves half a file.

`write_atomic` is specmon's one safe write, for every file it replaces whole (the data files, a
sweep folder's files, `--emit-vllm-dynamic`, the copied text of the chat): the temporary file has
a random name and is created exclusively without following links (tempfile.mkstemp:
O_CREAT|O_EXCL|O_NOFOLLOW), so a file or a symbolic link planted under a predictable temporary
name is never written through."""

from __future__ import annotations

import contextlib
import errno
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


def state_path(name: str, env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/specmon/<name>`; XDG's default `~/.local/state` when the variable is
    unset, empty or relative."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "specmon" / name


def read_at_most(path: Path, limit: int, *, follow_link: bool = True) -> bytes | None:
    """At most `limit` + 1 bytes of `path` (more than `limit`: the caller's file is too large),
    None when it does not exist. OSError when it cannot be read or is not a regular file (opened
    without blocking and checked before any read, so a FIFO there cannot hold the caller), or is
    a symbolic link and `follow_link` is False."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_link else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_link:
            raise OSError(errno.ELOOP, "it is a symbolic link, not followed") from None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise OSError("it is not a regular file (a directory, FIFO or device)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)


def new_file_mode() -> int:
    """The mode `open()` gives a new file (0o666 less the umask, read without changing it: Linux
    shows it in /proc/self/status); 0o644 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def write_atomic(
    path: Path, text: str, *, mode: int | None = None, refuse_link: bool = False
) -> None:
    """Replace `path` with `text` in one step; if it cannot (OSError, or text that does not
    encode), the old file stays as it was and no temporary file is left. The file is the
    owner's only (0600) unless `mode` is given (`new_file_mode()`: as `open()` would make it).
    A symbolic link at `path` is replaced, never written through; with `refuse_link` it is
    refused instead (OSError ELOOP, nothing written)."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    if refuse_link and path.is_symlink():
        raise OSError(errno.ELOOP, "it is a symbolic link (never written through)", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
