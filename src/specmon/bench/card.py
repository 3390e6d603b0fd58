"""A rig card: a shareable, redacted summary of a bench result or a sweep, as Markdown and JSON.

What users paste into issues by hand today: GPU, driver, vLLM, model, drafter, method, K, the
acceptance length and acceptance per draft position (positions numbered 1..K, as the app shows
them), speed, thermals, the workload, and the recommended `vllm serve` line (a sweep's, or the
line that reproduces a bench run's setting).

Redaction (core.redaction): every text goes through the one scrubber, `Scrubber` (API keys,
tokens, passwords, `--api-key X` in a serve line, the environment's token values); server URLs
and bare host names and addresses (`10.0.0.7`, `gpu-box:8000`, `node7.cluster.internal`,
`[fd00::7]`, the value of `--host`) are shown as `<server>`, and local paths (a model or dataset
given as a path) are cut to their last component, unless asked (`include_hosts`,
`include_paths`). Loopback and unspecified addresses (`127.0.0.1`, `0.0.0.0`, `localhost`,
`::1`) name no machine and are kept. A simulated run says so on the card.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from specmon.bench.recommend import ServeIdentity, serve_command
from specmon.bench.result import BenchResult, ResultError, fmt_pct, load_result, result_scrubber
from specmon.bench.sweep import SweepError, SweepStore, SweepSummary, summarize
from specmon.core.display_text import DASH, MAX_NUMBER_CHARS, fit
from specmon.core.numbers import finite, finite_json
from specmon.core.redaction import Scrubber

FORMAT = "specmon-card"
VERSION = 1
NOT_RECORDED = "not recorded"

_PATHLIKE = re.compile(r"(?<![\w:])(?:~|\.{1,2})?/(?:[^\s/'\"]+/)+([^\s/'\"]+)")
"""A local path (absolute, ~/, ./ or ../, with at least one folder): group 1 is its last part."""
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)
SERVER = "<server>"
"""What a server URL, host name or address is shown as on a card without include_hosts."""
_NOT_A_MACHINE = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]", "[::]", "::"})
_PORT = r"(?::\d{1,5})?"
_HOSTS = re.compile(
    "|".join(
        (
            # --host VALUE / --host=VALUE / --hostname VALUE
            r"(?P<flag>--host(?:name)?(?:=|\s+))(?P<value>[^\s'\",]+)",
            # [IPv6]:port
            r"\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\]" + _PORT,
            # IPv4[:port] (a first part of 0 is a version number: 0.10.1.1)
            r"(?<![\w.])(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d?)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}"
            + _PORT
            + r"(?![\w.])",
            # host.domain (a domain a host name ends in)
            r"(?<![\w./@-])(?:[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?\.)+"
            r"(?:local|localdomain|lan|internal|intranet|corp|home|private|cluster|"
            r"com|net|org|io|ai|dev|cloud|edu|gov)" + _PORT + r"(?![\w/.-])",
            # name:port (a port of 3 to 5 digits: `ngram:16` is not a server)
            r"(?<![\w./@:-])[A-Za-z][\w-]*(?:\.[\w-]+)*:\d{3,5}(?![\w.:/])",
        )
    )
)
"""A host name or address that is not inside a URL (URLs are replaced first)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (terminal escapes among them): shown as `\\xNN`, never sent raw."""


class CardError(ValueError):
    """What cannot be made into a card (one line naming the file and the reason)."""


@dataclass(frozen=True, slots=True)
class Redaction:
    include_hosts: bool = False
    include_paths: bool = False
    scrubber: Scrubber = field(default_factory=result_scrubber, repr=False, compare=False)
    """The one scrubber (core.redaction): secrets by shape and the environment's token values."""

    def text(self, value: str | None) -> str | None:
        if value is None:
            return None
        out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", self.scrubber.text(value))
        if not self.include_hosts:
            out = _HOSTS.sub(_host_shown, _URL.sub(SERVER, out))
        if not self.include_paths:
            out = _PATHLIKE.sub(lambda m: m.group(1), out)
        return out


def _host_shown(match: re.Match[str]) -> str:
    """A host name or address as a card shows it: SERVER, unless it names no machine."""
    flag, value = match.group("flag"), match.group("value")
    host = value if flag is not None else match.group()
    bare = re.sub(r"(?<=[^:\]]):\d{1,5}$|(?<=\]):\d{1,5}$", "", host).lower()
    if bare in _NOT_A_MACHINE:
        return match.group()
    return (flag or "") + SERVER


@dataclass(frozen=True, slots=True)
class ThermalRow:
    gpu: str | None
    index: int
    samples: int
    temperature_c: tuple[float | None, float | None, float | None]
    """min, mean, max."""
    power_w: tuple[float | None, float | None, float | None]
    sm_clock_mhz: tuple[float | None, float | None, float | None]


@dataclass(frozen=True, slots=True)
class SweepRow:
    n_spec: int
    concurrency: int
    serve: str
    tok_s: float | None
    acceptance_length: float | None
    speedup: float | None


@dataclass(frozen=True, slots=True)
class RigCard:
    """The card's content (what both renderings show)."""

    kind: Literal["bench", "sweep"]
    simulated: bool
    gpu: str | None
    driver: str | None
    vllm_version: str | None
    model: str | None
    draft_model: str | None
    method: str | None
    n_spec: int | None
    server: str | None
    """The server URL: only with include_hosts."""
    acceptance_length: float | None
    acceptance_rate: float | None
    per_position: tuple[float, ...]
    """Acceptance rate at draft positions 1..K (index 0 = position 1)."""
    output_tok_s: float | None
    decode_tok_s: float | None
    ttft_ms: float | None
    workload: dict[str, Any]
    thermals: tuple[ThermalRow, ...]
    serve_line: str | None
    sweep: tuple[SweepRow, ...] = ()
    created_at: str | None = None
    specmon_version: str | None = None
    foreign_share: float | None = None
    """The share of the server's generated tokens that were not the bench's own (bench)."""
    metrics_reliable: bool = True
    """False when foreign traffic above the threshold mixed into the /metrics acceptance."""


def _thermals(result: BenchResult, r: Redaction) -> tuple[ThermalRow, ...]:
    return tuple(
        ThermalRow(
            gpu=r.text(g.name),
            index=g.index,
            samples=g.samples,
            temperature_c=(g.temperature_c.min, g.temperature_c.mean, g.temperature_c.max),
            power_w=(g.power_w.min, g.power_w.mean, g.power_w.max),
            sm_clock_mhz=(g.sm_clock_mhz.min, g.sm_clock_mhz.mean, g.sm_clock_mhz.max),
        )
        for g in result.gpu
    )


def _workload(result: BenchResult, r: Redaction) -> dict[str, Any]:
    c = result.config
    return {
        "input_len": c.input_len,
        "output_len": c.output_len,
        "num_prompts": c.num_prompts,
        "concurrency": c.concurrency,
        "temperature": c.temperature,
        "ignore_eos": c.ignore_eos,
        "dataset": r.text(c.dataset),
    }


def bench_card(result: BenchResult, redaction: Redaction = Redaction()) -> RigCard:
    """The card of one bench run."""
    s, spec, server = result.summary, result.spec_decode, result.server
    r = redaction
    n_spec = server.n_spec
    identity = ServeIdentity(
        model=r.text(server.model), draft_model=r.text(server.draft_model), method=server.method
    )
    serve = serve_command(identity, n_spec) if n_spec is not None else None
    return RigCard(
        kind="bench",
        simulated=server.simulated,
        gpu=r.text(server.gpu or next((g.name for g in result.gpu if g.name), None)),
        driver=None,
        vllm_version=r.text(server.vllm_version),
        model=r.text(server.model),
        draft_model=r.text(server.draft_model),
        method=r.text(server.method),
        n_spec=n_spec,
        server=r.text(server.url) if r.include_hosts else None,
        acceptance_length=spec.acceptance_length,
        acceptance_rate=spec.acceptance_rate,
        per_position=spec.per_position or (),
        output_tok_s=s.output_throughput,
        decode_tok_s=s.decode_tok_s.mean,
        ttft_ms=s.ttft_ms.median,
        workload=_workload(result, r),
        thermals=_thermals(result, r),
        serve_line=r.text(serve),
        created_at=r.text(result.created_at),
        specmon_version=r.text(result.specmon_version),
        foreign_share=spec.foreign_share,
        metrics_reliable=spec.metrics_reliable,
    )


def _best_run(summary: SweepSummary, runs: dict[str, BenchResult]) -> BenchResult | None:
    """The run of the recommended n_spec at the lowest concurrency (else any run)."""
    recs = [x for x in summary.recommendations if x.by_throughput is not None]
    if recs:
        choice = recs[0].by_throughput
        assert choice is not None
        for key in sorted(runs):
            if key.startswith((f"n{choice.n_spec}-", f"n{choice.n_spec}_")):
                return runs[key]
    return runs[sorted(runs)[0]] if runs else None


def sweep_card(
    summary: SweepSummary, runs: dict[str, BenchResult], redaction: Redaction = Redaction()
) -> RigCard:
    """The card of a sweep: its table, the recommended serve line, and the recommended run's
    acceptance and thermals."""
    r = redaction
    best = _best_run(summary, runs)
    if best is None:
        raise CardError("the sweep has no finished run")
    base = bench_card(best, r)
    rows = tuple(
        SweepRow(
            n_spec=c.n_spec,
            concurrency=c.concurrency,
            serve=r.text(" ".join(f"{k}={v}" for k, v in c.serve)) or "",
            tok_s=c.tok_s.value if c.tok_s else None,
            acceptance_length=c.acceptance_length.value if c.acceptance_length else None,
            speedup=c.speedup,
        )
        for c in summary.cells
    )
    ident = summary.identity
    return replace(
        base,
        kind="sweep",
        simulated=summary.simulated or base.simulated,
        model=r.text(ident.model) or base.model,
        draft_model=r.text(ident.draft_model) or base.draft_model,
        method=r.text(ident.method) or base.method,
        serve_line=r.text(summary.command()),
        sweep=rows,
    )


def load_card(path: str | Path, redaction: Redaction = Redaction()) -> RigCard:
    """The card of a bench `--json` result, a sweep folder, or a file of a sweep folder
    (`sweep.json`, `summary.json`); CardError names what is wrong."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent if p.name in ("sweep.json", "summary.json") else None
    if folder is not None:
        store = SweepStore(folder)
        try:
            spec = store.load_spec()
        except SweepError as exc:
            raise CardError(str(exc)) from None
        bad: list[str] = []
        runs = store.load_runs(on_bad=bad.append)
        if bad:  # a card is shared: never one made from part of the runs without saying so
            raise CardError(bad[0])
        if not runs:
            raise CardError(f"{folder}: the sweep has no finished run yet")
        return sweep_card(summarize(spec, runs, store.load_failures()), runs, redaction)
    try:
        return bench_card(load_result(p), redaction)
    except ResultError as exc:
        raise CardError(str(exc)) from None


# ---------------------------------------------------------------- renderings


def card_json(card: RigCard) -> dict[str, Any]:
    d = finite_json(asdict(card))
    d["per_position"] = [
        {"position": i + 1, "acceptance_rate": finite(v)} for i, v in enumerate(card.per_position)
    ]
    return {"format": FORMAT, "version": VERSION, **d}


def card_json_text(card: RigCard) -> str:
    return json.dumps(card_json(card), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _f(value: float | None, digits: int = 2) -> str:
    return fit(value, f".{digits}f", MAX_NUMBER_CHARS)


def _cell(text: str | None) -> str:
    if text is None:
        return DASH
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("\n", " ")


def _trio(t: tuple[float | None, float | None, float | None], digits: int = 0) -> str:
    return " / ".join(_f(v, digits) for v in t)


def _unreliable(card: RigCard) -> str:
    """After the card's acceptance: another client's traffic mixed into it, when it did."""
    if card.metrics_reliable or card.foreign_share is None:
        return ""
    return f" (UNRELIABLE: {card.foreign_share:.0%} of the tokens were another client's)"


def card_markdown(card: RigCard) -> str:
    """The card as Markdown (tables ready to paste into an issue)."""
    title = "specmon rig card" + (
        " (SIMULATED: every number comes from specmon's simulator)" if card.simulated else ""
    )
    lines = [f"### {title}", ""]
    lines += ["| | |", "|---|---|"]
    rows: Sequence[tuple[str, str]] = (
        ("GPU", _cell(card.gpu)),
        ("Driver", _cell(card.driver or NOT_RECORDED)),
        ("vLLM", _cell(card.vllm_version)),
        ("Model", _cell(card.model)),
        ("Drafter", _cell(card.draft_model)),
        ("Method", _cell(card.method)),
        ("K (num_speculative_tokens)", DASH if card.n_spec is None else str(card.n_spec)),
        ("Acceptance length", _f(card.acceptance_length) + _unreliable(card)),
        ("Draft acceptance rate", fmt_pct(card.acceptance_rate)),  # 42.1%, as bench says
        ("Output tok/s", _f(card.output_tok_s, 1)),
        ("Decode tok/s (mean per request)", _f(card.decode_tok_s, 1)),
        ("TTFT median (ms)", _f(card.ttft_ms, 1)),
    )
    lines += [f"| {k} | {v} |" for k, v in rows]
    if card.server is not None:
        lines.append(f"| Server | {_cell(card.server)} |")
    w = card.workload
    lines += [
        "",
        f"Workload: {w['input_len']} prompt tokens, {w['output_len']} output tokens, "
        f"{w['num_prompts']} prompts, concurrency {w['concurrency']}, temperature "
        f"{w['temperature']:g}, dataset {_cell(w['dataset'])}"
        + (", ignore_eos" if w["ignore_eos"] else "")
        + ".",
    ]
    if card.per_position:
        lines += ["", "Acceptance per draft position:", ""]
        lines.append(
            "| position | " + " | ".join(str(i + 1) for i in range(len(card.per_position))) + " |"
        )
        lines.append("|---|" + "---|" * len(card.per_position))
        lines.append("| accepted | " + " | ".join(fmt_pct(v) for v in card.per_position) + " |")
    if card.thermals:
        lines += ["", "Thermals (min / mean / max over the run):", ""]
        lines += ["| GPU | samples | °C | W | SM MHz |", "|---|---|---|---|---|"]
        for t in card.thermals:
            lines.append(
                f"| {t.index} {_cell(t.gpu)} | {t.samples} | {_trio(t.temperature_c)} | "
                f"{_trio(t.power_w)} | {_trio(t.sm_clock_mhz)} |"
            )
    if card.sweep:
        lines += ["", "Sweep:", ""]
        lines += ["| K | concurrency | serve | tok/s | AL | vs K=0 |", "|---|---|---|---|---|---|"]
        for s in card.sweep:
            speed = DASH if s.speedup is None else f"{_f(s.speedup)}x"
            lines.append(
                f"| {s.n_spec} | {s.concurrency} | {_cell(s.serve) if s.serve else '—'} | "
                f"{_f(s.tok_s, 1)} | {_f(s.acceptance_length)} | {speed} |"
            )
    if card.serve_line:
        label = "Recommended serve line" if card.kind == "sweep" else "Serve line of this setting"
        lines += ["", f"{label}:", "", "```", card.serve_line.replace("```", "'''"), "```"]
    made = ", ".join(
        x
        for x in (card.specmon_version and f"specmon {card.specmon_version}", card.created_at)
        if x
    )
    if made:
        lines += ["", f"<sub>{_cell(made)}</sub>"]
    return "\n".join(lines) + "\n"
