"""The periodic log lines have vLLM's NEW format (reference §2), parseable by its regex."""

from __future__ import annotations

import re

from specmon.sim.logs import IntervalStats, engine_line, prefixed, spec_line

SPEC_RE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mal>[\d.]+|nan), Accepted throughput: "
    r"(?P<acc_tps>[\d.]+) tokens/s, Drafted throughput: (?P<dr_tps>[\d.]+) tokens/s, Accepted: "
    r"(?P<acc>\d+) tokens, Drafted: (?P<dr>\d+) tokens, Per-position acceptance rate: "
    r"(?P<pos>[\d., na]*), Avg Draft acceptance rate: (?P<rate>[\d.]+|nan)%"
)
ENGINE_RE = re.compile(
    r"Engine 000: Avg prompt throughput: (?P<p>[\d.]+) tokens/s, Avg generation throughput: "
    r"(?P<g>[\d.]+) tokens/s, Running: (?P<r>\d+) reqs, Waiting: (?P<w>\d+) reqs, GPU KV cache "
    r"usage: (?P<kv>[\d.]+)%, Prefix cache hit rate: (?P<hit>[\d.]+)%"
)


def test_spec_line_from_interval_sums() -> None:
    stats = IntervalStats(accepted_per_pos=[0, 0, 0, 0])
    stats.add_step(tokens=5, drafts=1, draft_tokens=4, accepted=4)
    stats.add_step(tokens=2, drafts=1, draft_tokens=4, accepted=1)
    stats.add_step(tokens=1, drafts=1, draft_tokens=4, accepted=0)
    match = SPEC_RE.fullmatch(spec_line(stats, 2.0))
    assert match is not None
    assert match["mal"] == "2.67"  # 1 + 5/3
    assert match["acc"] == "5" and match["dr"] == "12"
    assert match["acc_tps"] == "2.50" and match["dr_tps"] == "6.00"
    assert match["pos"] == "0.667, 0.333, 0.333, 0.333"
    assert match["rate"] == "41.7"


def test_spec_line_without_drafts_says_nan() -> None:
    match = SPEC_RE.fullmatch(spec_line(IntervalStats(accepted_per_pos=[0, 0]), 10.0))
    assert match is not None
    assert match["mal"] == "nan" and match["rate"] == "nan"


def test_engine_line_and_prefix() -> None:
    stats = IntervalStats(prompt_tokens=512, generation_tokens=2240)
    line = prefixed(engine_line(stats, 10.0, 1, 0, 0.006, 0.25), 42, "08-20 15:42:49", "x.py:1")
    assert line.startswith("(APIServer pid=42) INFO 08-20 15:42:49 [x.py:1] Engine 000: ")
    match = ENGINE_RE.search(line)
    assert match is not None
    assert (match["p"], match["g"], match["kv"], match["hit"]) == ("51.2", "224.0", "0.6", "25.0")
