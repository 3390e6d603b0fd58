"""The result of one bench run: per-request records and the summary, as JSON, CSV and Markdown.

JSON (`--json FILE`) is the exchange format: `specmon compare` and `specmon sweep --resume` read
it back. Top-level keys: `format` ("specmon-bench"), `version`, `created_at`, `specmon_version`,
`label`, `server`, `config`, `summary`, `spec_decode`, `requests`, `cycle`, `gpu`, `errors`.
Times are milliseconds (`*_ms`), speeds tokens per second (`*_tok_s`); a number that could not be
measured is null (shown as "—"), never 0.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from specmon.bench.config import BenchConfig, check_config
from specmon.bench.limits import (
    MAX_ANY,
    MAX_COUNT,
    MAX_MS,
    MAX_RESULT_N_SPEC,
    MAX_SECONDS,
    MAX_TOK_S,
    LimitError,
    check_number,
)
from specmon.bench.stats import Dist
from specmon.core.display_text import DASH, MAX_NUMBER_CHARS, fit
from specmon.core.redaction import Scrubber
from specmon.core.safe_json import JsonError, loads_bounded
from specmon.sources.data_files import read_at_most

FORMAT = "specmon-bench"
VERSION = 1


class ResultError(ValueError):
    """A file that is not a readable bench result; str() names the file and the reason."""


def result_scrubber(*urls: str | None) -> Scrubber:
    """What a bench or sweep file goes through before it is written: the passwords of `urls`
    and the environment's token values are known secrets (core.redaction.Scrubber)."""
    return Scrubber.of(urls=urls, environ=os.environ)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server a run measured (what it said about itself; None = it did not say)."""

    url: str
    model: str | None = None
    vllm_version: str | None = None
    simulated: bool = False
    profile: str | None = None
    n_spec: int | None = None
    spec_configured: bool | None = None
    gpu: str | None = None
    method: str | None = None
    draft_model: str | None = None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One measured request (index = order of sending within the measured phase)."""

    index: int
    request_id: str
    outcome: str
    error: str | None = None
    t_send_s: float | None = None
    """Send time in seconds after the measured phase started."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_count: int = 0
    output_tok_s: float | None = None
    """completion tokens / E2EL (the request's own output throughput)."""
    decode_tok_s: float | None = None
    """(completion tokens - 1) / (last token - first token)."""
    decode_chunks: int = 0
    acceptance_length: float | None = None
    al_source: str | None = None
    """"server" (vLLM's per-request metrics.speculative_decoding) or "client" (tokens per chunk)."""
    server_al: float | None = None
    client_al: float | None = None
    per_position: tuple[float, ...] | None = None
    """Per-position acceptance of this request (from the server's acceptance histogram)."""
    vanilla: bool = False
    vanilla_reasons: tuple[tuple[str, str], ...] = ()
    phase: str | None = None
    """The cycle detector's class for this request (fast, transition, degraded), if a cycle."""
    quality: str | None = None
    """"loop" or "garbled" when the quality sentinel flagged the answer (core.diagnosis.quality,
    judged before speed: such an answer takes no part in the cycle)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Run-level numbers, as `vllm bench serve` defines them (reference §4.3)."""

    completed: int
    failed: int
    duration_s: float | None
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    ttft_ms: Dist
    tpot_ms: Dist
    itl_ms: Dist
    e2el_ms: Dist
    request_output_tok_s: Dist
    decode_tok_s: Dist
    vanilla_requests: int = 0
    loop_requests: int = 0
    """Answers the quality sentinel flagged as loops (their text repeats at a very high AL)."""
    garbled_requests: int = 0


@dataclass(frozen=True, slots=True)
class SpecDecodeBlock:
    """Acceptance over the measured phase: /metrics counter deltas, plus per-request means."""

    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    """Δaccepted / Δdraft_tokens, 0..1."""
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    per_position: tuple[float, ...] | None = None
    counter_resets: int = 0
    """Scrapes that found the counters lower than before: server restarts during the run."""
    metrics_available: bool = False
    server_al_mean: float | None = None
    client_al_mean: float | None = None
    server_generation_tokens: float | None = None
    """Δ vllm:generation_tokens_total over the measured phase: every client's tokens."""
    own_generation_tokens: int | None = None
    """The tokens bench's own requests generated (their completion tokens)."""
    foreign_share: float | None = None
    """The share of the server's generated tokens that were not bench's (another client's),
    0..1; None when the server exports no generation counter."""
    metrics_reliable: bool = True
    """False when foreign_share > FOREIGN_THRESHOLD: the /metrics acceptance (AL, rate, per
    position) mixes in the other clients' traffic and is not this run's."""


FOREIGN_THRESHOLD = 0.10
"""A share of foreign traffic above this marks the run's /metrics acceptance unreliable."""


def foreign_line(sd: SpecDecodeBlock) -> str | None:
    """One line on the other clients' traffic mixed into the /metrics numbers (None: none
    seen, or the server has no generation counter)."""
    if sd.foreign_share is None or sd.foreign_share <= 0.0:
        return None
    own, total = sd.own_generation_tokens or 0, sd.server_generation_tokens or 0.0
    line = (
        f"foreign traffic: {sd.foreign_share:.0%} of the server's generated tokens were not "
        f"bench's ({own:,} of {total:,.0f} were)"
    )
    if not sd.metrics_reliable:
        line += (
            f"; above {FOREIGN_THRESHOLD:.0%}, the /metrics acceptance is UNRELIABLE (it mixes "
            "in another client's requests): use the per-request AL"
        )
    return line


@dataclass(frozen=True, slots=True)
class GpuStat:
    """min / mean / max of one GPU reading over the run (None without readings)."""

    min: float | None = None
    mean: float | None = None
    max: float | None = None


@dataclass(frozen=True, slots=True)
class GpuBlock:
    name: str | None = None
    index: int = 0
    samples: int = 0
    temperature_c: GpuStat = field(default_factory=GpuStat)
    power_w: GpuStat = field(default_factory=GpuStat)
    sm_clock_mhz: GpuStat = field(default_factory=GpuStat)


@dataclass(frozen=True, slots=True)
class ErrorBlock:
    failed: int = 0
    cancelled: int = 0
    """Requests in flight when the run was interrupted (not failures, not measured)."""
    by_message: dict[str, int] = field(default_factory=dict)
    engine_dead: bool = False
    engine_dead_reason: str | None = None
    engine_dead_after: int | None = None
    """Requests completed before the engine was found dead."""
    server_restarts: int = 0
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class CycleBlock:
    period: int
    cycles: int
    fast_per_cycle: float
    transitions_per_cycle: float
    degraded_per_cycle: float
    recoveries_per_cycle: float
    fast_mean_tok_s: float
    degraded_mean_tok_s: float | None
    long_run_mean_tok_s: float
    share_degraded: float
    score: float


@dataclass(frozen=True, slots=True)
class BenchResult:
    server: ServerInfo
    config: BenchConfig
    summary: Summary
    spec_decode: SpecDecodeBlock
    requests: tuple[RequestRecord, ...]
    errors: ErrorBlock
    gpu: tuple[GpuBlock, ...] = ()
    cycle: CycleBlock | None = None
    label: str | None = None
    created_at: str | None = None
    specmon_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "created_at": self.created_at,
            "specmon_version": self.specmon_version,
            "label": self.label,
            "server": asdict(self.server),
            "config": self.config.as_dict(),
            "summary": _summary_dict(self.summary),
            "spec_decode": asdict(self.spec_decode),
            "requests": [asdict(r) for r in self.requests],
            "cycle": asdict(self.cycle) if self.cycle else None,
            "gpu": [asdict(g) for g in self.gpu],
            "errors": asdict(self.errors),
        }
        return d

    def to_json(self) -> str:
        """The result file's text, scrubbed (core.redaction.Scrubber: the server URL's
        password, the environment's token values, secrets by shape in every text)."""
        return json.dumps(
            result_scrubber(self.server.url).value(self.as_dict()), indent=1, ensure_ascii=False
        )

    @staticmethod
    def from_dict(d: dict[str, Any], *, where: str = "result") -> BenchResult:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ResultError(f"{where}: not a specmon bench result (no format {FORMAT!r})")
        version = d.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise ResultError(f"{where}: result version {version!r} is not one this reads")
        try:
            result = _from_dict(_nan_as_missing(d))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResultError(
                f"{where}: damaged bench result ({type(exc).__name__}: {exc})"
            ) from None
        try:
            check_config(result.config)
            _check_values(result, "", None)
        except LimitError as exc:
            raise ResultError(f"{where}: {exc}") from None
        return result


# ---------------------------------------------------------------- the values' ranges


def _nan_as_missing(value: Any) -> Any:
    """NaN (Python's json reads and writes it) as null, the format's "not measured", at any
    depth; an infinite number stays, to be refused as out of range."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _nan_as_missing(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_as_missing(v) for v in value]
    return value


Range = tuple[float, float, str, bool]
"""lo, hi, unit, integer."""

_COUNT: Range = (0, MAX_COUNT, "", False)
_COUNTS = (
    "completed", "failed", "total_input_tokens", "total_output_tokens", "vanilla_requests",
    "loop_requests", "garbled_requests",
    "index", "prompt_tokens", "completion_tokens", "itl_count", "decode_chunks", "drafts",
    "draft_tokens", "accepted", "counter_resets", "cancelled", "by_message", "engine_dead_after",
    "server_restarts", "samples", "period", "cycles", "n", "fast_per_cycle",
    "server_generation_tokens", "own_generation_tokens",
    "transitions_per_cycle", "degraded_per_cycle", "recoveries_per_cycle",
)  # fmt: skip
_RATE: Range = (0.0, 1.0, "", False)
_RANGES: dict[str, Range] = {
    "n_spec": (0, MAX_RESULT_N_SPEC, "", True),
    **dict.fromkeys(
        ("acceptance_length", "server_al", "client_al", "server_al_mean", "client_al_mean"),
        (0.0, MAX_RESULT_N_SPEC + 1.0, "", False),
    ),
    **dict.fromkeys(("acceptance_rate", "per_position", "share_degraded", "foreign_share"), _RATE),
    **dict.fromkeys(("duration_s", "t_send_s"), (0.0, MAX_SECONDS, "s", False)),
    **dict.fromkeys(
        ("request_throughput", "output_throughput", "total_token_throughput"),
        (0.0, MAX_TOK_S, "per second", False),
    ),
    **dict.fromkeys(_COUNTS, _COUNT),
    "temperature_c": (-100.0, 250.0, "°C", False),
    "power_w": (0.0, 100_000.0, "W", False),
    "sm_clock_mhz": (0.0, 100_000.0, "MHz", False),
}
"""Each number's range by its field's name (a Dist's or a GpuStat's members take their
field's); names ending in _ms are latencies, in _tok_s speeds; any other number is finite and
within ±MAX_ANY."""

_ANY: Range = (-MAX_ANY, MAX_ANY, "", False)
_TEXT_TYPES = frozenset({"str", "str | None"})
_NUMBER_TYPES = frozenset({"int", "int | None", "float", "float | None"})


def _range_of(name: str, inherited: Range | None) -> Range | None:
    if name in _RANGES:
        return _RANGES[name]
    if name.endswith("_ms"):
        return (0.0, MAX_MS, "ms", False)
    if name.endswith("_tok_s"):
        return (0.0, MAX_TOK_S, "tok/s", False)
    return inherited


def _check_values(value: Any, path: str, rng: Range | None, kind: str = "") -> None:
    """Every number of a result (its config aside) finite and in its field's range, every text
    field text: LimitError naming the field's path (`summary.decode_tok_s.mean`)."""
    if kind == "Dist" and not isinstance(value, Dist):
        raise LimitError(f"{path} is not a distribution (n, mean, median, ...)")
    if is_dataclass(value) and not isinstance(value, type):
        if isinstance(value, BenchConfig):
            return  # check_config
        for f in fields(value):
            name = f.name
            _check_values(
                getattr(value, name),
                f"{path}.{name}" if path else name,
                _range_of(name, rng),
                str(f.type),
            )
    elif isinstance(value, tuple | list):
        limit = MAX_RESULT_N_SPEC if path.endswith("per_position") else None
        if limit is not None and len(value) > limit:
            raise LimitError(f"{path} lists {len(value):,} positions (at most {limit})")
        for i, item in enumerate(value):
            _check_values(item, f"{path}[{i}]", rng)
    elif isinstance(value, dict):
        for item in value.values():
            _check_values(item, path, rng)
    elif kind in _TEXT_TYPES:
        if value is not None and not isinstance(value, str):
            raise LimitError(f"{path} is not a text")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi, unit, integer = rng or _ANY
        check_number(value, path, lo, hi, integer=integer, unit=unit)
    elif kind in _NUMBER_TYPES and value is not None:
        raise LimitError(f"{path} {value!r:.40} is not a number")


def _summary_dict(s: Summary) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for name in Summary.__dataclass_fields__:
        v = getattr(s, name)
        d[name] = v.as_dict() if isinstance(v, Dist) else v
    return d


def _tuple_or_none(v: Any) -> tuple[float, ...] | None:
    return tuple(float(x) for x in v) if isinstance(v, list) else None


def _from_dict(d: dict[str, Any]) -> BenchResult:
    s = d["summary"]
    values: dict[str, Any] = {
        name: (Dist.from_dict(s[name]) if isinstance(s.get(name), dict) else s.get(name))
        for name in Summary.__dataclass_fields__
    }
    summary = Summary(**values)
    spec = dict(d.get("spec_decode") or {})
    spec["per_position"] = _tuple_or_none(spec.get("per_position"))
    requests = []
    for r in d.get("requests") or []:
        r = dict(r)
        r["per_position"] = _tuple_or_none(r.get("per_position"))
        r["vanilla_reasons"] = tuple(tuple(x) for x in r.get("vanilla_reasons") or ())
        requests.append(RequestRecord(**r))
    gpu = []
    for g in d.get("gpu") or []:
        gpu.append(
            GpuBlock(
                name=g.get("name"),
                index=g.get("index", 0),
                samples=g.get("samples", 0),
                temperature_c=GpuStat(**(g.get("temperature_c") or {})),
                power_w=GpuStat(**(g.get("power_w") or {})),
                sm_clock_mhz=GpuStat(**(g.get("sm_clock_mhz") or {})),
            )
        )
    cycle = d.get("cycle")
    return BenchResult(
        server=ServerInfo(**d["server"]),
        config=BenchConfig.from_dict(d.get("config") or {}),
        summary=summary,
        spec_decode=SpecDecodeBlock(**spec),
        requests=tuple(requests),
        errors=ErrorBlock(**(d.get("errors") or {})),
        gpu=tuple(gpu),
        cycle=CycleBlock(**cycle) if isinstance(cycle, dict) else None,
        label=d.get("label"),
        created_at=d.get("created_at"),
        specmon_version=d.get("specmon_version"),
    )


def load_result(path: str | Path) -> BenchResult:
    """A result from a `--json` file (ResultError with the file name when it cannot be read)."""
    p = Path(path)
    try:  # /dev/zero, a pipe, a folder: never read them whole
        raw = read_at_most(p, MAX_RESULT_BYTES)
    except OSError as exc:
        raise ResultError(f"cannot read {p}: {exc.strerror or exc}") from None
    if raw is None:
        raise ResultError(f"cannot read {p}: it does not exist")
    if len(raw) > MAX_RESULT_BYTES:
        raise ResultError(f"cannot read {p}: larger than {MAX_RESULT_BYTES // 2**20} MiB")
    try:
        data = loads_bounded(raw)
    except JsonError as exc:
        raise ResultError(f"{p} is not a usable result: {exc}") from None
    return BenchResult.from_dict(data, where=str(p))


MAX_RESULT_BYTES = 1024 * 1024 * 1024
"""The largest `--json` result read (a million requests' records are about 500 MiB)."""


# ---------------------------------------------------------------- CSV and Markdown

CSV_FIELDS: tuple[str, ...] = (
    "index",
    "request_id",
    "outcome",
    "t_send_s",
    "prompt_tokens",
    "completion_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "itl_mean_ms",
    "output_tok_s",
    "decode_tok_s",
    "acceptance_length",
    "al_source",
    "vanilla",
    "vanilla_reasons",
    "phase",
    "error",
)


def requests_csv(result: BenchResult) -> str:
    """One CSV row per measured request (empty cell = not measured)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in result.requests:
        row: list[Any] = []
        for name in CSV_FIELDS:
            v = getattr(r, name)
            if name == "vanilla_reasons":
                v = "; ".join(code for code, _ in v)
            elif name == "vanilla":
                v = "yes" if v else ""
            row.append("" if v is None else v)
        writer.writerow(row)
    return out.getvalue()


def fmt(value: float | None, digits: int = 1) -> str:
    """A number with `digits` decimals and thousands separators; the dash when missing, out of
    range past MAX_NUMBER_CHARS characters (core.display_text.fit)."""
    return fit(value, f",.{digits}f", MAX_NUMBER_CHARS)


def _md_cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, newlines folded (server text is literal)."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def interrupted_line(result: BenchResult) -> str:
    """What an interrupted run holds, in one line: finished of planned, and the requests that
    were in flight (cancelled, not counted)."""
    done, cfg, cancelled = result.summary.completed, result.config, result.errors.cancelled
    if cfg.duration_s is None:
        finished = f"{done} of {cfg.num_prompts} measured requests finished"
    else:
        finished = f"{done} measured requests finished before the soak's {cfg.duration_s:g} s"
    text = f"INTERRUPTED: partial results, {finished}"
    if cancelled:
        text += f"; {cancelled} in flight cancelled, not counted"
    return text


def summary_markdown(result: BenchResult) -> str:
    """The run as a Markdown report (the same numbers as the terminal summary)."""
    s, sd, srv = result.summary, result.spec_decode, result.server
    lines = [
        f"# specmon bench — {_md_cell(srv.model or srv.url)}",
        "",
        f"- server: {_md_cell(srv.url)}" + (" (SIMULATED)" if srv.simulated else ""),
        f"- vLLM: {_md_cell(srv.vllm_version or DASH)}; n_spec: "
        f"{DASH if srv.n_spec is None else srv.n_spec}; GPU: {_md_cell(srv.gpu or DASH)}",
        f"- workload: {_md_cell(result.config.dataset)} input {result.config.input_len}, output "
        f"{result.config.output_len}, {result.config.num_prompts} prompts, concurrency "
        f"{result.config.concurrency}, temperature {result.config.temperature:g}"
        + (", ignore_eos" if result.config.ignore_eos else ""),
    ]
    if result.errors.interrupted:
        lines += ["", f"**{interrupted_line(result)}**"]
    lines += [
        "",
        "| metric | value |",
        "|---|---:|",
        f"| completed / failed | {s.completed} / {s.failed} |",
        f"| duration (s) | {fmt(s.duration_s, 2)} |",
        f"| output tok/s | {fmt(s.output_throughput)} |",
        f"| total tok/s | {fmt(s.total_token_throughput)} |",
        f"| request tok/s mean / max | {fmt(s.request_output_tok_s.mean)} / "
        f"{fmt(s.request_output_tok_s.max)} |",
        f"| acceptance length (/metrics) | {fmt(sd.acceptance_length, 2)}"
        f"{'' if sd.metrics_reliable else ' (UNRELIABLE: foreign traffic)'} |",
        *(
            [f"| foreign traffic (share of the server's tokens) | {fmt_pct(sd.foreign_share)} |"]
            if sd.foreign_share
            else []
        ),
        f"| draft acceptance rate | {fmt_pct(sd.acceptance_rate)} |",
        f"| vanilla-speed requests | {s.vanilla_requests} |",
        f"| loop / garbled answers | {s.loop_requests} / {s.garbled_requests} |",
        "",
        "| latency (ms) | mean | median | p95 | p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, d in (
        ("TTFT", s.ttft_ms),
        ("TPOT", s.tpot_ms),
        ("ITL", s.itl_ms),
        ("E2EL", s.e2el_ms),
    ):
        lines.append(
            f"| {name} | {fmt(d.mean, 2)} | {fmt(d.median, 2)} | {fmt(d.p95, 2)} | "
            f"{fmt(d.p99, 2)} |"
        )
    if sd.per_position:
        lines += ["", "| position | acceptance |", "|---:|---:|"]
        lines += [f"| {i} | {fmt_pct(v)} |" for i, v in enumerate(sd.per_position, start=1)]
    if result.cycle:
        c = result.cycle
        lines += [
            "",
            f"**Degradation cycle**: period {c.period} requests ({c.fast_per_cycle:g} fast, "
            f"{c.transitions_per_cycle:g} transition, {c.degraded_per_cycle:g} degraded, "
            f"{c.recoveries_per_cycle:g} recovery); fast-phase mean {c.fast_mean_tok_s:.1f} tok/s, "
            f"long-run mean {c.long_run_mean_tok_s:.1f} tok/s.",
        ]
    e = result.errors
    if e.engine_dead:
        lines += [
            "",
            f"**Engine dead** after {e.engine_dead_after} requests: "
            f"{_md_cell(e.engine_dead_reason or '')}",
        ]
    if e.by_message:
        lines += ["", "| errors | count |", "|---|---:|"]
        lines += [f"| {_md_cell(m)} | {n} |" for m, n in e.by_message.items()]
    return "\n".join(lines) + "\n"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    """A 0..1 share as a percentage (core.display_text.fit: the dash when missing)."""
    return fit(value * 100 if value is not None else None, f".{digits}f", 8, "%")
