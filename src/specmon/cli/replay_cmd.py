"""`specmon replay FILE`: show a recorded session again (docs/replay.md).

The recording goes through the recording player (a source like any other) into a fresh session
state, so every derived number is recomputed with this specmon's code. `--json` replays as fast as
possible and prints the final snapshot (the JSON of `specmon watch --json`, docs/watch-json.md).
On a terminal, the replay screen (the dashboard's panel, the answers, a timeline) plays it at the
recording's pace times `--speed` (x0.5 to x64), labelled RECORDED (and SIMULATED when the session
was simulated): space pauses, +/- change the speed, left/right seek 10 s (shift: 60 s),
home/end, n/N jump to the next/previous flag or marker, a click on the timeline seeks. Without a
terminal, one line per request (the plain lines: docs/app.md, "Without a terminal").

The vanilla-speed flag is judged against `--baseline`, else the baseline the recording says the
session was judged against (its header's `baseline_tok_s`), else the stored one; `--json` says
which (`session.baseline_tok_s`, `session.baseline_from`: given, recording or stored).

Exit status: 0 after a replay, also one that stopped at a torn, cut or over-long line or at an
impossible time (a notice naming the line goes to stderr; bad lines skipped are counted in one
notice); 2 for a recording that is missing, not a regular file, not a recording, or from a newer
version (one line on stderr); 130 when interrupted (Ctrl-C: SIGINT, or the key in the app;
q or ctrl+q quits with 0), 143 on SIGTERM, 129 on SIGHUP.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from specmon.cli.args import add_command, positive_float
from specmon.cli.session_setup import add_baseline_argument, add_theme_argument

NAME = "replay"
SUMMARY = "replay a recorded session (--json: print its final snapshot)"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument("file", metavar="FILE", help="a recording (.ndjson, or .ndjson.gz)")
    p.add_argument(
        "--speed",
        type=positive_float,
        default=1.0,
        metavar="X",
        help="pace multiplier (default 1.0: as recorded; 4: four times faster); the replay "
        "screen holds it within 0.5..64 and changes it with +/-; --json always replays as fast "
        "as possible",
    )
    p.add_argument("--json", action="store_true", help="print the final snapshot as JSON")
    add_theme_argument(p)
    add_baseline_argument(p, recorded=True)


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    path: str
    json: bool = False
    speed: float = 1.0
    baseline: float | None = None
    theme: str | None = None


def plan_from(args: argparse.Namespace) -> ReplayPlan:
    return ReplayPlan(
        args.file, json=args.json, speed=args.speed, baseline=args.baseline, theme=args.theme
    )


def run(plan: ReplayPlan) -> int:
    from specmon.ui.replay_app import run_replay

    return run_replay(
        plan.path, json=plan.json, speed=plan.speed, baseline=plan.baseline, theme=plan.theme
    )
