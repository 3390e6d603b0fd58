"""Parse vLLM's periodic log lines: "SpecDecoding metrics: …" and "Engine 000: …" throughput.

Every format of reference §2 and the V0 "Speculative metrics:" line. Lines may carry the process
prefix "(APIServer pid=N) INFO 08-20 15:42:49 [file.py:123] " and ANSI colour codes; both are
tolerated. A line that is not one of these gives None (log text is untrusted: nothing raises).

Acceptance length is always normalised to INCLUDE the bonus token. v0.8.5 printed accepted/drafts
(no +1) under the same words as v0.9+; the two are told apart by the per-position rates, whose sum
is exactly accepted/drafts (position i counts drafts whose first i+1 tokens were accepted), or by
the vLLM version when the caller knows it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from specmon.core.numbers import parse_float, parse_int

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_NUM = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"


def strip_ansi(line: str) -> str:
    """The line without ANSI escape sequences."""
    return _ANSI.sub("", line)


@dataclass(frozen=True, slots=True)
class SpecDecodingLog:
    """One spec-decode log line (interval numbers since the previous line)."""

    acceptance_length: float | None
    """Mean acceptance length INCLUDING the bonus token (normalised across versions)."""
    draft_acceptance_rate: float | None
    """Accepted / drafted tokens as a fraction 0..1 (the line prints a percentage)."""
    accepted_tokens: int | None
    drafted_tokens: int | None
    per_position_rates: tuple[float, ...] | None
    accepted_tok_s: float | None = None
    drafted_tok_s: float | None = None
    format: str = "new"
    """"new" (v0.11+), "v0.9" (v0.9.0-0.10.x), "v0.8.5", "v0.8.3" or "v0"."""


@dataclass(frozen=True, slots=True)
class EngineLog:
    """One engine throughput line."""

    engine: int | None
    """Engine index ("Engine 000"); None on V0 lines and aggregated lines."""
    engines_aggregated: int | None
    prompt_tok_s: float | None
    generation_tok_s: float | None
    running: int | None
    waiting: int | None
    kv_cache_usage: float | None
    """KV cache usage as a fraction 0..1 (the line prints a percentage; "GPU KV cache usage", or
    "CPU KV cache usage" on V1 lines of vLLM's CPU backend)."""
    prefix_cache_hit_rate: float | None = None
    deferred: int | None = None
    preemptions: int | None = None
    swapped: int | None = None
    cpu_kv_cache_usage: float | None = None
    format: str = "v1"
    """"v1" (Engine NNN / N Engines Aggregated) or "v0"."""


_SPEC_FIELDS = {
    "al": re.compile(rf"Mean acceptance length: ({_NUM})"),
    "acc_tps": re.compile(rf"Accepted throughput: ({_NUM}) tokens/s"),
    "dr_tps": re.compile(rf"Drafted throughput: ({_NUM}) tokens/s"),
    "acc": re.compile(r"Accepted: (\d+) tokens"),
    "dr": re.compile(r"Drafted: (\d+) tokens"),
    "pos": re.compile(rf"Per-position acceptance rate: ((?:{_NUM})(?:, (?:{_NUM}))*)"),
    "rate": re.compile(rf"(?:Avg )?Draft acceptance rate: ({_NUM})%"),
}
_V0_SPEC = re.compile(
    rf"Speculative metrics: Draft acceptance rate: ({_NUM}), System efficiency: ({_NUM}), "
    rf"Number of speculative tokens: (\d+), Number of accepted tokens: (\d+), "
    rf"Number of draft tokens: (\d+), Number of emitted tokens: (\d+)"
)


def _version_before_0_9(version: str | None) -> bool | None:
    if not version:
        return None
    m = re.match(r"v?(\d+)\.(\d+)", version.strip())
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2))) < (0, 9)


def parse_spec_decoding_line(
    line: str, *, vllm_version: str | None = None
) -> SpecDecodingLog | None:
    """A SpecDecodingLog from a vLLM log line, or None when the line is not one."""
    text = strip_ansi(line)
    idx = text.find("SpecDecoding metrics: ")
    if idx == -1:
        return _parse_v0_spec(text)
    body = text[idx + len("SpecDecoding metrics: ") :]
    found = {k: r.search(body) for k, r in _SPEC_FIELDS.items()}
    if found["acc"] is None or found["dr"] is None:
        return None
    accepted = parse_int(found["acc"].group(1))
    drafted = parse_int(found["dr"].group(1))
    if accepted is None or drafted is None:
        return None
    rate_pct = parse_float(found["rate"].group(1)) if found["rate"] else None
    rate = rate_pct / 100 if rate_pct is not None else None
    per_pos: tuple[float, ...] | None = None
    if found["pos"]:
        values = [parse_float(v.strip()) for v in found["pos"].group(1).split(",")]
        if all(v is not None for v in values):
            per_pos = tuple(v for v in values if v is not None)
    printed_al = parse_float(found["al"].group(1)) if found["al"] else None

    if body.startswith("Mean acceptance length"):
        fmt = "new"
    elif found["al"] is None:
        fmt = "v0.8.3"
    else:
        fmt = "v0.9"
        old = _version_before_0_9(vllm_version)
        if old is None and printed_al is not None and per_pos:
            s = math.fsum(per_pos)
            old = abs(printed_al - s) < abs(printed_al - (1.0 + s))
        if old:
            fmt = "v0.8.5"
    al = printed_al
    if fmt == "v0.8.5" and al is not None:
        al = al + 1.0
    return SpecDecodingLog(
        acceptance_length=al,
        draft_acceptance_rate=rate,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        per_position_rates=per_pos,
        accepted_tok_s=parse_float(found["acc_tps"].group(1)) if found["acc_tps"] else None,
        drafted_tok_s=parse_float(found["dr_tps"].group(1)) if found["dr_tps"] else None,
        format=fmt,
    )


def _parse_v0_spec(text: str) -> SpecDecodingLog | None:
    m = _V0_SPEC.search(text)
    if not m:
        return None
    accepted, drafted = parse_int(m.group(4)), parse_int(m.group(5))
    if accepted is None or drafted is None:
        return None
    return SpecDecodingLog(
        acceptance_length=None,
        draft_acceptance_rate=parse_float(m.group(1)),
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        per_position_rates=None,
        format="v0",
    )


_ENGINE_HEAD = re.compile(r"(?:Engine (\d+)|(\d+) Engines Aggregated): (Avg prompt throughput: .*)")
_V0_HEAD = re.compile(r"(Avg prompt throughput: .*Swapped: .*)")
_PARTS = {
    "prompt": re.compile(rf"^Avg prompt throughput: ({_NUM}) tokens/s$"),
    "gen": re.compile(rf"^Avg generation throughput: ({_NUM}) tokens/s$"),
    "running": re.compile(r"^Running: (\d+) reqs?$"),
    "waiting": re.compile(r"^(?:Waiting|Pending): (\d+) reqs?$"),
    "deferred": re.compile(r"^Deferred: (\d+) reqs?$"),
    "swapped": re.compile(r"^Swapped: (\d+) reqs?$"),
    "preempt": re.compile(r"^Preemptions: (\d+)$"),
    "kv": re.compile(rf"^GPU KV cache usage: ({_NUM})%$"),
    "cpu_kv": re.compile(rf"^CPU KV cache usage: ({_NUM})%$"),
    "prefix": re.compile(rf"^Prefix cache hit rate: ({_NUM})%$"),
}


def parse_engine_line(line: str) -> EngineLog | None:
    """An EngineLog from an engine throughput log line (NEW, v0.8-0.10, V0), or None."""
    text = strip_ansi(line).rstrip()
    m = _ENGINE_HEAD.search(text)
    engine = aggregated = None
    if m:
        engine = parse_int(m.group(1))
        aggregated = parse_int(m.group(2))
        body, fmt = m.group(3), "v1"
    else:
        m0 = _V0_HEAD.search(text)
        if not m0:
            return None
        body, fmt = m0.group(1), "v0"
    values: dict[str, str] = {}
    for part in body.rstrip(".").split(", "):
        for key, rx in _PARTS.items():
            pm = rx.match(part.strip())
            if pm:
                values[key] = pm.group(1)
                break
    if "prompt" not in values or "gen" not in values:
        return None

    def _i(key: str) -> int | None:
        return parse_int(values.get(key))

    def _pct(key: str) -> float | None:
        v = parse_float(values.get(key))
        return v / 100 if v is not None else None

    kv = _pct("kv")
    if kv is None and fmt == "v1":
        kv = _pct("cpu_kv")  # vLLM's CPU backend prints "CPU KV cache usage" for its KV cache
    return EngineLog(
        engine=engine,
        engines_aggregated=aggregated,
        prompt_tok_s=parse_float(values["prompt"]),
        generation_tok_s=parse_float(values["gen"]),
        running=_i("running"),
        waiting=_i("waiting"),
        kv_cache_usage=kv,
        prefix_cache_hit_rate=_pct("prefix"),
        deferred=_i("deferred"),
        preemptions=_i("preempt"),
        swapped=_i("swapped"),
        cpu_kv_cache_usage=_pct("cpu_kv"),
        format=fmt,
    )


def parse_log_line(
    line: str, *, vllm_version: str | None = None
) -> SpecDecodingLog | EngineLog | None:
    """Either kind of line, or None."""
    return parse_spec_decoding_line(line, vllm_version=vllm_version) or parse_engine_line(line)
