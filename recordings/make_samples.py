"""Regenerate the sample recordings in this folder with specmon's own simulator and recorder.

    PYTHONPATH=src python3 recordings/make_samples.py            # every sample that is missing
    PYTHONPATH=src python3 recordings/make_samples.py --force    # rewrite them all
    PYTHONPATH=src python3 recordings/make_samples.py healthy    # one of them

Each sample is `specmon demo` against the built-in SIMULATED server (its header says
`"simulated": true`), recorded with `--record`, so the files are exactly what a user's
`specmon demo --record` writes. The simulator is deterministic per request (seeded profile and
schedule); arrival times come from the real clock, so a regenerated file differs in its
timestamps, not in what it shows. All three run at the simulator's own pace (`--speed 1`: the
tok/s are the simulated GPU's; demo-cycle takes about 70 s to make), so a replay at x1 looks like
the live session (tests/component/test_sample_recordings.py checks what each one claims).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from specmon.cli.main import main as specmon

HERE = Path(__file__).resolve().parent

SAMPLES: dict[str, tuple[str, list[str]]] = {
    "demo-cycle": (
        "the seed's degradation cycle: 30 requests, period 10 (5 fast, 1 transition, 3 degraded, "
        "1 recovery)",
        ["--speed", "1", "--requests", "30", "--max-tokens", "256"],
    ),
    "healthy": (
        "a healthy run: 12 requests, no schedule, speculation working throughout",
        ["--speed", "1", "--requests", "12", "--max-tokens", "128", "--schedule", ""],
    ),
    "restart": (
        "a server restart: the counters reset before request 9 of 14 (fault `restart`)",
        [
            "--speed",
            "1",
            "--requests",
            "14",
            "--max-tokens",
            "128",
            "--schedule",
            "cycle:8f,1f+restart,5f",
        ],
    ),
}


def make(name: str, *, force: bool) -> Path:
    path = HERE / f"{name}.ndjson.gz"
    if path.exists():
        if not force:
            print(f"{path.name}: exists (use --force to rewrite)")
            return path
        path.unlink()
    what, args = SAMPLES[name]
    with contextlib.redirect_stdout(io.StringIO()):  # the demo's final JSON is not needed
        status = specmon(["demo", *args, "--json", "--record", str(path)])
    if status != 0:
        raise SystemExit(f"{name}: specmon demo exited {status}")
    print(f"{path.name}: {what}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=[[], *SAMPLES], default=[])
    parser.add_argument("--force", action="store_true", help="rewrite existing files")
    args = parser.parse_args(argv)
    for name in args.names or list(SAMPLES):
        make(name, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
