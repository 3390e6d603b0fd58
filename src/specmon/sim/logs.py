"""vLLM-shaped periodic log lines (the NEW forms of reference §2), built from interval sums.

Pure: the caller passes the interval's numbers and the time text; printing is the server's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOG_PREFIX = "(APIServer pid={pid}) INFO {stamp} [{source}] "


@dataclass(slots=True)
class IntervalStats:
    """Sums over one logging interval (reset after each log)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def add_step(self, tokens: int, drafts: int, draft_tokens: int, accepted: int) -> None:
        self.generation_tokens += tokens
        if drafts:
            self.drafts += drafts
            self.draft_tokens += draft_tokens
            self.accepted += accepted
            per_pos = self.accepted_per_pos
            for i in range(accepted):
                if i < len(per_pos):
                    per_pos[i] += 1

    @property
    def busy(self) -> bool:
        return self.prompt_tokens > 0 or self.generation_tokens > 0


def engine_line(
    stats: IntervalStats,
    elapsed_s: float,
    running: int,
    waiting: int,
    kv_usage: float,
    prefix_hit_rate: float,
) -> str:
    """`Engine 000: Avg prompt throughput: …` for one interval."""
    elapsed = max(elapsed_s, 1e-9)
    return (
        f"Engine 000: Avg prompt throughput: {stats.prompt_tokens / elapsed:.1f} tokens/s, "
        f"Avg generation throughput: {stats.generation_tokens / elapsed:.1f} tokens/s, "
        f"Running: {running} reqs, Waiting: {waiting} reqs, "
        f"GPU KV cache usage: {kv_usage * 100:.1f}%, "
        f"Prefix cache hit rate: {prefix_hit_rate * 100:.1f}%"
    )


def spec_line(stats: IntervalStats, elapsed_s: float) -> str:
    """`SpecDecoding metrics: …` for one interval (`nan` where nothing was drafted)."""
    elapsed = max(elapsed_s, 1e-9)
    if stats.drafts:
        mean_al = f"{1 + stats.accepted / stats.drafts:.2f}"
        per_pos = ", ".join(f"{n / stats.drafts:.3f}" for n in stats.accepted_per_pos)
    else:
        mean_al = "nan"
        per_pos = ", ".join("nan" for _ in stats.accepted_per_pos)
    rate = f"{stats.accepted / stats.draft_tokens * 100:.1f}" if stats.draft_tokens else "nan"
    return (
        f"SpecDecoding metrics: Mean acceptance length: {mean_al}, "
        f"Accepted throughput: {stats.accepted / elapsed:.2f} tokens/s, "
        f"Drafted throughput: {stats.draft_tokens / elapsed:.2f} tokens/s, "
        f"Accepted: {stats.accepted} tokens, Drafted: {stats.draft_tokens} tokens, "
        f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate}%"
    )


def prefixed(message: str, pid: int, stamp: str, source: str) -> str:
    """A full log line: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:NNN] message`."""
    return LOG_PREFIX.format(pid=pid, stamp=stamp, source=source) + message
