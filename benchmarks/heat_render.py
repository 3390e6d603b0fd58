"""The cost of colouring an answer by acceptance heat (the h / F7 key), against the cost of the
Markdown render the app already does once per finished answer, in the same run.

Per answer: the heat from its chunks (`core.step_heat.answer_heat`) and from a server step array,
the coloured Text (`ui.widgets.answer.heat_text`: one span per run of a class) and its wrapping
to lines at 100 columns (`render_text_lines`, what `TextLines` keeps) — against `render_lines` of
the same text as Markdown at 100 columns (the final render). Answers: Python-like code and prose
of 1k, 4k and 16k tokens (a token is a word or a piece of a code line, about 9 characters), steps
of 1..K+1 tokens (K = 8, seeded), one chunk per step with every 20th chunk merging two steps.
Rounds interleave the five jobs; medians.

Text of 512 characters or more is wrapped in the worker thread (as Markdown of that size is), so
what the key costs the UI thread is the heat and the coloured Text. Target: that is at most a
quarter of the Markdown render of the same answer (which the app does once per answer anyway).

    python benchmarks/heat_render.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections.abc import Callable

from specmon.core.step_heat import TextPiece, TokenMap, answer_heat, heat_from_steps
from specmon.ui.widgets.heat import HEAT_DEFAULTS, heat_styles, heat_text
from specmon.ui.widgets.markdown_lines import Piece, render_lines, render_text_lines

K = 8
WIDTH = 100
WORDS = (
    *("the", "draft", "model", "proposes", "tokens", "and", "the", "target"),
    *("verifies", "them", "in", "one", "step;"),
    "def merge(a, b):\n   ",
    "out = []\n   ",
    "while a and b:\n       ",
    "out.append(min(a, b))\n",
)


def answer(tokens: int, seed: int) -> tuple[list[TextPiece], bytes]:
    """Chunks (text, cumulative tokens) and the server's per-step accepted counts."""
    rng = random.Random(seed)
    pieces = [TextPiece("Sure", 1)]
    steps: list[int] = []
    done = 1
    pending_text = ""
    pending = 0
    n = 0
    while done < tokens:
        accepted = min(rng.choice((0, 0, 1, 3, 5, 8, 8, 8)), tokens - done - 1)
        steps.append(accepted)
        count = accepted + 1
        text = "".join(rng.choice(WORDS) + " " for _ in range(count))
        done += count
        pending_text += text
        pending += count
        n += 1
        if n % 20 == 19:  # this chunk merges with the next step's
            continue
        pieces.append(TextPiece(pending_text, done))
        pending_text, pending = "", 0
    if pending_text:
        pieces.append(TextPiece(pending_text, done, final=True))
    return pieces, bytes(steps)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(tokens: int, rounds: int) -> tuple[int, int, list[float]]:
    """(chars, runs, medians in ms: heat from chunks, heat from steps, coloured Text, its
    wrapping, the Markdown render)."""
    styles = heat_styles(HEAT_DEFAULTS)
    pieces, steps = answer(tokens, seed=tokens)
    text = "".join(p.text for p in pieces)
    token_map = TokenMap.from_pieces(pieces)
    heat = answer_heat(pieces, n_spec=K)
    coloured = heat_text(text, heat, styles)
    times: list[list[float]] = [[], [], [], [], []]
    jobs: list[Callable[[], object]] = [
        lambda: answer_heat(pieces, n_spec=K),
        lambda: heat_from_steps(steps, token_map, n_spec=K, completion_tokens=tokens),
        lambda: heat_text(text, heat, styles),
        lambda: render_text_lines(coloured, WIDTH),
        lambda: render_lines(Piece(text), WIDTH),
    ]
    for _ in range(rounds):
        for i, job in enumerate(jobs):
            times[i].append(timed(job) * 1000)
    return len(text), len(coloured.spans), [statistics.median(t) for t in times]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    cpu = platform.processor() or platform.machine()
    print(f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} CPUs, ", end="")
    print(f"Python {platform.python_version()}, medians of {args.rounds} rounds, width {WIDTH}")
    print()
    print(
        "| tokens | chars | runs | heat from chunks ms | heat from steps ms | coloured Text ms "
        "| UI thread: toggle ms | worker: wrap ms | worker: Markdown render ms | wrap / Markdown |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    render_lines(Piece("warm *up*\n\n```python\nx = 1\n```\n"), WIDTH)  # imports, not timed
    worst_ui = 0.0
    for tokens in (1_000, 4_000, 16_000):
        chars, runs, (c, s, t, w, m) = measure(tokens, args.rounds)
        ui = c + t  # what the key costs the UI thread (the wrap is the worker's, as Markdown's)
        worst_ui = max(worst_ui, ui / m)
        print(
            f"| {tokens} | {chars} | {runs} | {c:.2f} | {s:.2f} | {t:.2f} | {ui:.2f} | {w:.2f} "
            f"| {m:.2f} | {w / m:.2f} |"
        )
    print()
    print(f"worst UI-thread toggle / Markdown render: {worst_ui:.2f} (target <= 0.25)")
    return 0 if worst_ui <= 0.25 else 1


if __name__ == "__main__":
    raise SystemExit(main())
