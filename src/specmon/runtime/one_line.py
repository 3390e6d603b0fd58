"""A command's failure as one line: `specmon COMMAND: MESSAGE` on stderr, and the exit status.

The one wording of every command's failure, used by the command line (`cli/args.py` re-exports
`fail`) and by the layers that run a command's work for it (bench/, ui/, runtime/)."""

from __future__ import annotations

import sys


def fail(command: str, message: str, code: int = 2) -> int:
    """Say `specmon COMMAND: MESSAGE` on stderr (one line) and return the exit status (2: bad
    arguments or a failed check before anything started)."""
    print(f"specmon {command}: {message}", file=sys.stderr)
    return code
