"""`specmon bench --context-sweep 1024,8192,20480`: the same bench at several prompt lengths, and
acceptance by context length (docs/diagnosis.md, "Acceptance by context length").

Each length runs the bench as `--input-len` would (same output length). Random prompts are random
words sized with /tokenize: junk context, on which a learned drafter's acceptance can fall at any
context length, so the result says so (RANDOM_CONTEXT_CAVEAT) and a fall found on them is not
called a context limit. With `--dataset FILE` each prompt is the dataset's own text cut to the
length's token count (prompts.text_prompts): coherent context. The table gives each run's AL
(the server's /metrics counters over the measured phase, else the mean per-request AL) and speed,
and all runs' events together are folded into the context bins of core.diagnosis.context_cliff,
so the falling-off point is found over every step measured.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from specmon.bench.config import MAX_TOKENS_LIMIT, BenchConfig, ConfigError
from specmon.bench.result import BenchResult
from specmon.core.diagnosis.context_cliff import BIN_EDGES, ContextCliffView, find_cliff
from specmon.core.display_text import MAX_NUMBER_CHARS, fit
from specmon.core.events import Event, SessionInfo
from specmon.core.session_state import SessionState

MAX_LENGTHS = 16

RANDOM_WORDS = "random words"
DATASET_TEXT = "dataset text"
RANDOM_CONTEXT_CAVEAT = (
    "the prompts are random words: a fall in acceptance may be the drafter's answer to junk "
    "context rather than a context limit; --dataset FILE sweeps on real text"
)


@dataclass(frozen=True, slots=True)
class ContextPoint:
    """One run of the sweep."""

    input_len: int
    completed: int
    acceptance_length: float | None
    output_tok_s: float | None
    decode_tok_s: float | None


@dataclass(frozen=True, slots=True)
class ContextSweepResult:
    points: tuple[ContextPoint, ...]
    context: ContextCliffView
    """Acceptance by context length over every measured step of every run."""
    prompt_text: str = RANDOM_WORDS
    """What the context was: RANDOM_WORDS, or DATASET_TEXT (the dataset's text cut to size)."""
    caveat: str | None = RANDOM_CONTEXT_CAVEAT
    """What the finding cannot tell (random words: RANDOM_CONTEXT_CAVEAT); None on real text."""


def parse_lengths(text: str) -> tuple[int, ...]:
    """`1024,8192,20480` → the lengths, increasing; ConfigError (one line) when bad."""
    out: list[int] = []
    for raw in text.split(","):
        item = raw.strip()
        try:
            n = int(item)
        except ValueError:
            raise ConfigError(
                f"--context-sweep: {item!r} is not a token count (e.g. 1024,8192,20480)"
            ) from None
        if not 1 <= n <= MAX_TOKENS_LIMIT:
            raise ConfigError(f"--context-sweep: {n} is out of range (1..{MAX_TOKENS_LIMIT})")
        out.append(n)
    if not 2 <= len(set(out)) <= MAX_LENGTHS:
        raise ConfigError(f"--context-sweep needs 2..{MAX_LENGTHS} different lengths")
    return tuple(sorted(set(out)))


def point_of(input_len: int, result: BenchResult) -> ContextPoint:
    sd = result.spec_decode
    al = sd.acceptance_length if sd.acceptance_length is not None else sd.client_al_mean
    return ContextPoint(
        input_len=input_len,
        completed=result.summary.completed,
        acceptance_length=al,
        output_tok_s=result.summary.output_throughput,
        decode_tok_s=result.summary.decode_tok_s.mean,
    )


def context_of(events: Sequence[Event], n_spec: int | None) -> ContextCliffView:
    """Acceptance by context over the runs' events (folded as a session would fold them). The
    sweep's workload is controlled (one prompt length a run), so the cliff is looked for without
    the live session's guard of MIN_ANSWERS_PER_SIDE answers on each side."""
    state = SessionState(SessionInfo(n_spec=n_spec), max_requests=1)
    for e in events:
        state.apply(e)
    d = state.view().diagnosis
    assert d is not None
    steps, tokens = [0] * len(BIN_EDGES), [0] * len(BIN_EDGES)
    for b in d.context.bins:
        i = BIN_EDGES.index(b.lo_tokens)
        steps[i], tokens[i] = b.steps, b.tokens
    return find_cliff(BIN_EDGES, steps, tokens)


async def run_context_sweep(
    config: BenchConfig,
    lengths: Sequence[int],
    run: Callable[[BenchConfig], Awaitable[tuple[list[Event], BenchResult]]],
) -> tuple[list[BenchResult], ContextSweepResult]:
    """Run the bench once per length (`run` does one run: its events and result)."""
    results: list[BenchResult] = []
    points: list[ContextPoint] = []
    events: list[Event] = []
    n_spec: int | None = None
    for length in lengths:
        run_events, result = await run(replace(config, input_len=length))
        results.append(result)
        points.append(point_of(length, result))
        events.extend(run_events)
        n_spec = n_spec if n_spec is not None else result.server.n_spec
        if result.errors.interrupted:
            break
    random_words = config.dataset == "random"
    return results, ContextSweepResult(
        tuple(points),
        context_of(events, n_spec),
        prompt_text=RANDOM_WORDS if random_words else DATASET_TEXT,
        caveat=RANDOM_CONTEXT_CAVEAT if random_words else None,
    )


def render(sweep: ContextSweepResult) -> str:
    """The sweep's table and its finding, as plain text."""

    def num(x: float | None, fmt: str) -> str:
        return fit(x, fmt, MAX_NUMBER_CHARS)

    lines = ["input tokens  answers  AL     output tok/s  decode tok/s"]
    for p in sweep.points:
        lines.append(
            f"{p.input_len:>12}  {p.completed:>7}  {num(p.acceptance_length, '5.2f'):>5}  "
            f"{num(p.output_tok_s, '12.1f'):>12}  {num(p.decode_tok_s, '12.1f'):>12}"
        )
    c = sweep.context
    on = f"acceptance by context on {sweep.prompt_text}"
    if c.detected:
        lines.append(f"{on}: {c.summary}")
    else:
        lines.append(f"{on}: no fall-off found over {c.steps} steps")
    if sweep.caveat:
        lines.append(f"caveat: {sweep.caveat}")
    return "\n".join(lines)
