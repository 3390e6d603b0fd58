"""The answers the simulated server writes: text written for this project, so a demo reads like a
real chat (paragraphs, a list, a fenced code block) without downloading anything."""

from __future__ import annotations

ANSWERS: tuple[str, ...] = (
    """Speculative decoding lets a small drafter propose several tokens ahead, and the target \
model checks them all in one forward pass. When the drafter guesses well, one verify step yields \
many tokens; when it guesses badly, the step still yields one token, but it costs more than a \
plain decode step would.

Three numbers tell you which case you are in:

1. **Acceptance length** — tokens emitted per verify step, bonus token included. It is \
`1 + accepted / drafts` over any window of the counters.
2. **Draft acceptance rate** — accepted draft tokens divided by drafted tokens.
3. **Decode tokens per second** — the only number your users feel.

A quick way to read them from a running server:

```python
import httpx

page = httpx.get("http://127.0.0.1:8000/metrics").text
for line in page.splitlines():
    if line.startswith("vllm:spec_decode_num_accepted_tokens_total"):
        print(line)
```

If the acceptance length stays near 1.0 while drafts are still proposed, the request is running \
at vanilla speed, or a little below it, because every step still pays for verification.
""",
    """The best `num_speculative_tokens` is not a constant: it depends on the GPU, the model, the \
drafter and the prompts. Deeper drafts raise the acceptance length, but the verify pass grows \
with every extra position, and on a bandwidth-limited card the cost wins sooner.

A sweep that you can trust looks like this:

- start the server once per setting and wait for `/health` to answer;
- send two warm-up requests that you do not count;
- measure with fixed prompt and output lengths, `ignore_eos` and temperature 0;
- keep concurrency at 1, so that the counters belong to your request alone;
- report the mean throughput **and** the p95 latency, since the two can disagree.

```bash
for n in 0 4 8 12 15; do
  vllm serve "$MODEL" --speculative-config "{\\"num_speculative_tokens\\": $n}" &
  ./wait-for-health.sh && vllm bench serve --max-concurrency 1 --ignore-eos
  kill %1; wait
done
```

On a laptop GPU the peak often sits lower than on a desktop card with twice the memory \
bandwidth. Measure on the machine you serve from.
""",
    """A request that falls to vanilla speed is easy to miss in an average. Streamed with \
`continuous_usage_stats`, every chunk carries the cumulative completion tokens, so the tokens of \
one engine step are the difference between two chunks.

What to look for:

1. Chunks of exactly one token, many in a row, while the server reports drafts.
2. A decode rate at or below the baseline you measured with `n_spec=0`.
3. The per-position acceptance collapsing at position 0 first.

```python
def tokens_per_step(chunks: list[int]) -> list[int]:
    \"\"\"Tokens each chunk carried, from cumulative completion counts.\"\"\"
    steps = []
    previous = 0
    for total in chunks:
        steps.append(total - previous)
        previous = total
    return steps
```

When this happens in a regular pattern — several fast requests, one in between, a few slow \
ones, then fast again — suspect the drafter's state rather than the GPU. A thermal throttle \
looks different: clocks drop, and every request slows together.
""",
    """Reading `/metrics` correctly takes a little care. Counters only grow, except when the \
server restarts; then they start again from zero, and a naive difference turns negative.

A robust reader does three things:

- it keeps the exact `_total` sample names and ignores the `_created` timestamps beside them;
- it sums the series of every engine, because each data-parallel rank has its own;
- it treats a counter that went down as a reset, and counts from the new value.

```python
def delta(previous: float, current: float) -> float:
    \"\"\"Increase of a counter between two scrapes, surviving a restart.\"\"\"
    return current if current < previous else current - previous
```

Histograms need the same care. The inter-token latency histogram is observed once per engine \
step, not once per token, so under speculative decoding it measures the verify step. The time per \
output token histogram, recorded when a request finishes, is the per-token figure.
""",
    """Here is a small plan for watching a speculative-decoding server during a busy day.

First, take a baseline. Run the same benchmark with speculation off, store the decode rate next \
to the model name, the GPU and the vLLM version, and keep it. Without a baseline you can tell \
that a request was slow, but not that it ran at vanilla speed.

Second, watch the live numbers:

1. generation tokens per second across the server;
2. acceptance length over the last window of the counters;
3. the per-position acceptance, which shows where the drafts start to miss;
4. GPU temperature, power and clocks, to rule throttling in or out.

Third, keep a recording. A session file with every chunk, every scrape and every GPU sample \
lets you replay the afternoon and show a colleague exactly when the speed fell \
(`specmon watch --record sessions/today.ndjson.gz`).

The server and the cadence can live in specmon's config file, so a plain `specmon watch` \
uses them:

```toml
[watch]
attach = ["http://gpu-box:8000"]
interval = 1.0
canary = 300
```

Most surprises turn out to be ordinary: a second client sharing the batch, a prompt that the \
drafter has never seen the like of, or a draft depth tuned on another machine.
""",
    """The verify pass is where the cost of speculation hides. The target model runs one forward \
pass over the bonus position and every draft position, so its cost grows with the draft depth \
even when none of the drafts are accepted.

A simple model of one step:

- the drafter proposes all positions in a single pass, at a small cost;
- the target verifies them, at the cost of a plain step plus a little per position;
- the step emits the accepted drafts plus one bonus token.

From that model the throughput follows directly:

```python
def tokens_per_second(acceptance_length: float, step_seconds: float) -> float:
    return acceptance_length / step_seconds
```

With an acceptance length of 3.7 and a step of 16.5 ms, that is about 224 tokens per second; with \
the same step and an acceptance length of 1.0, it is about 60. The step did not get cheaper when \
the drafts stopped landing, which is why a degraded request can be slower than no speculation at \
all.
""",
)
