"""From the events of a bench run to its result (pure: events in, BenchResult out).

The live run and a replayed recording go through this one function, so a recorded run gives the
same report again, and an improved detector improves old recordings.

The run's phases are Marker events written by the runner:
- `bench:start` — the measured phase begins (warm-ups are before it and are not counted);
- `bench:end` — the last measured request finished (the duration is end - start);
- `bench:engine-dead: REASON` — the runner gave up on the server;
- `bench:interrupted` — Ctrl-C.
The /metrics deltas are taken from the last scrape at or before the start to the first scrape at
or after the end, reset-corrected over every scrape in between (a server restart mid-run is
counted in `counter_resets`, and the deltas stay non-negative).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from specmon.bench.config import BenchConfig
from specmon.bench.result import (
    FOREIGN_THRESHOLD,
    BenchResult,
    CycleBlock,
    ErrorBlock,
    GpuBlock,
    GpuStat,
    RequestRecord,
    ServerInfo,
    SpecDecodeBlock,
    Summary,
)
from specmon.bench.stats import dist
from specmon.core import families
from specmon.core.counters import CounterBank, sum_by_name, window_between
from specmon.core.detectors.cycle import detect_cycle
from specmon.core.detectors.vanilla import VanillaContext, judge
from specmon.core.diagnosis.quality import MAX_TEXT_CHARS, HealthyAL, check_answer
from specmon.core.events import (
    Event,
    GpuReading,
    GpuSampled,
    Marker,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    StreamChunk,
)
from specmon.core.specdecode import gauge_sum, spec_decode_stats
from specmon.core.stream_stats import RequestStats, RequestTrace, request_stats

START, END, DEAD, INTERRUPTED = "bench:start", "bench:end", "bench:engine-dead", "bench:interrupted"
RUNNING = "vllm:num_requests_running"


@dataclass(frozen=True, slots=True)
class Window:
    start: float | None
    end: float | None


def markers(events: Iterable[Event]) -> dict[str, Marker]:
    """The first marker of each bench kind (the label up to the first ':' after 'bench:')."""
    found: dict[str, Marker] = {}
    for e in events:
        if isinstance(e, Marker) and e.label.startswith("bench:"):
            kind = e.label.split(": ", 1)[0]
            found.setdefault(kind, e)
    return found


def server_per_position(spec: dict[str, object] | None) -> tuple[float, ...] | None:
    """Per-position acceptance of one request from vLLM's per-request metrics.

    From `acceptance_histogram` (index j = steps that accepted exactly j drafts): position i's
    rate = steps that accepted more than i drafts / all steps. Else from `per_step_accepted`.
    """
    if not isinstance(spec, dict):
        return None
    counts = _counts(spec.get("acceptance_histogram"))
    if counts is None:
        steps = _counts(spec.get("per_step_accepted"))
        k = _counts([spec.get("num_spec_tokens")])
        if steps:
            width = k[0] if k and k[0] > 0 else max(steps)
            counts = [0] * (width + 1)
            for x in steps:
                counts[min(x, width)] += 1
    if not counts:
        return None
    total = sum(counts)
    if total <= 0 or len(counts) < 2:
        return None
    return tuple(
        sum(counts[j] for j in range(i + 1, len(counts))) / total for i in range(len(counts) - 1)
    )


def _counts(value: object) -> list[int] | None:
    """A non-empty list of whole numbers >= 0, else None (server text is not trusted)."""
    if not isinstance(value, list) or not value:
        return None
    out: list[int] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            return None
        out.append(x)
    return out


def _stat(values: Sequence[float]) -> GpuStat:
    data = [v for v in values if v is not None and math.isfinite(v)]
    if not data:
        return GpuStat()
    return GpuStat(min(data), math.fsum(data) / len(data), max(data))


def gpu_blocks(samples: Sequence[GpuSampled]) -> tuple[GpuBlock, ...]:
    """Temperature, power and SM clock min/mean/max per GPU over the samples."""
    by_index: dict[int, list[GpuReading]] = {}
    for s in samples:
        for r in s.gpus:
            by_index.setdefault(r.index, []).append(r)
    blocks = []
    for index in sorted(by_index):
        rs = by_index[index]
        blocks.append(
            GpuBlock(
                name=next((r.name for r in rs if r.name), None),
                index=index,
                samples=len(rs),
                temperature_c=_stat([r.temperature_c for r in rs if r.temperature_c is not None]),
                power_w=_stat([r.power_w for r in rs if r.power_w is not None]),
                sm_clock_mhz=_stat([r.sm_clock_mhz for r in rs if r.sm_clock_mhz is not None]),
            )
        )
    return tuple(blocks)


def _spec_block(
    scrapes: Sequence[MetricsScraped], window: Window
) -> tuple[SpecDecodeBlock, bool | None, int | None]:
    """(block from /metrics deltas over the window, spec configured?, K from the page)."""
    if not scrapes or window.start is None:
        return SpecDecodeBlock(), None, None
    before = [s for s in scrapes if s.t <= window.start]
    first = before[-1] if before else scrapes[0]
    end = window.end if window.end is not None else scrapes[-1].t
    after = [s for s in scrapes if s.t >= end]
    last = after[0] if after else scrapes[-1]
    span = [s for s in scrapes if first.t <= s.t <= last.t]
    bank = CounterBank(keep_seconds=math.inf, max_points=4)
    resets = 0
    first_point = None
    for s in span:
        resets += 1 if bank.observe(s.t, s.samples) else 0
        if first_point is None:
            first_point = bank.latest()
    last_point = bank.latest()
    configured = any(x.name.startswith("vllm:spec_decode") for x in last.samples)
    positions = {
        dict(x.labels).get("position")
        for x in last.samples
        if x.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    }
    positions.discard(None)
    k = len(positions) or None
    if first_point is None or last_point is None or first_point is last_point:
        return SpecDecodeBlock(counter_resets=resets), configured, k
    deltas = window_between(first_point, last_point).deltas
    stats = spec_decode_stats(deltas)
    return (
        SpecDecodeBlock(
            acceptance_length=stats.acceptance_length,
            acceptance_rate=stats.draft_acceptance_rate,
            drafts=stats.drafts,
            draft_tokens=stats.draft_tokens,
            accepted=stats.accepted,
            per_position=stats.per_position_rates,
            counter_resets=resets,
            metrics_available=True,
            server_generation_tokens=sum_by_name(deltas, families.GENERATION_TOKENS),
        ),
        configured,
        k,
    )


def analyze(
    events: Sequence[Event],
    *,
    server: ServerInfo,
    config: BenchConfig,
    baseline_tok_s: float | None = None,
    label: str | None = None,
    created_at: str | None = None,
    specmon_version: str | None = None,
) -> BenchResult:
    """The BenchResult of a run's events (see the module docstring for the phases)."""
    marks = markers(events)
    start = marks[START].t if START in marks else None
    end = marks[END].t if END in marks else None
    if start is None:  # no marker (a recording of something else): the whole span
        starts = [e.t for e in events if isinstance(e, RequestStarted)]
        start = min(starts) if starts else None
    traces: dict[str, RequestTrace] = {}
    texts: dict[str, list[str]] = {}
    order: list[str] = []
    scrapes: list[MetricsScraped] = []
    gpus: list[GpuSampled] = []
    for e in events:
        if isinstance(e, RequestStarted):
            if start is not None and e.t < start:
                continue  # a warm-up
            traces[e.request_id] = RequestTrace(e.request_id)
            order.append(e.request_id)
            traces[e.request_id].add(e)
        elif isinstance(e, StreamChunk | RequestEnded):
            trace = traces.get(e.request_id)
            if trace is not None:
                trace.add(e)
                if isinstance(e, StreamChunk) and e.text:
                    _keep_tail(texts.setdefault(e.request_id, []), e.text)
        elif isinstance(e, MetricsScraped):
            scrapes.append(e)
        elif isinstance(e, GpuSampled):
            gpus.append(e)
    if end is None:
        ends = [t.ended.t for t in traces.values() if t.ended is not None]
        end = max(ends) if ends else start
    window = Window(start, end)
    spec_block, configured, k_page = _spec_block(scrapes, window)
    if server.spec_configured is not None:
        configured = server.spec_configured
    n_spec = server.n_spec if server.n_spec is not None else k_page
    if configured is False:
        n_spec = 0 if n_spec is None else n_spec

    stats = [request_stats(traces[rid], n_spec=n_spec) for rid in order]
    run_gpus = [g for g in gpus if start is None or end is None or start <= g.t <= end]
    intervals = [(s.t_send, s.t_end if s.t_end is not None else end) for s in stats]
    records: list[RequestRecord] = []
    for i, s in enumerate(stats):
        t0, t1 = intervals[i]
        readings = tuple(
            r for g in gpus if t0 is not None and t1 is not None and t0 <= g.t <= t1 for r in g.gpus
        )
        overlapping = 0
        if t0 is not None and t1 is not None:
            for j, (u0, u1) in enumerate(intervals):
                if j != i and u0 is not None and u1 is not None and u0 < t1 and t0 < u1:
                    overlapping += 1
        running = [
            v
            for sc in scrapes
            if t0 is not None and t1 is not None and t0 <= sc.t <= t1
            for v in [gauge_sum(sc.samples, RUNNING)]
            if v is not None
        ]
        verdict = judge(
            s,
            VanillaContext(
                baseline_tok_s=baseline_tok_s,
                spec_configured=configured,
                n_spec=n_spec,
                gpu_readings=readings,
                overlapping_requests=overlapping,
                server_running_max=max(running) if running else None,
            ),
        )
        records.append(_record(i, s, start, verdict.flagged, verdict.reasons, traces[order[i]]))

    records = _with_quality(records, texts, n_spec)
    ok = [r for r in records if r.outcome == "ok"]
    cycle = None
    # Quality before speed: a loop or garbled answer keeps its place but sets no level.
    speeds = [r.output_tok_s if r.quality is None else None for r in ok]
    measured = all(s is not None for s, r in zip(speeds, ok, strict=True) if r.quality is None)
    report = detect_cycle(speeds) if measured else None
    if report is not None:
        cycle = CycleBlock(
            period=report.period,
            cycles=report.cycles,
            fast_per_cycle=report.fast_per_cycle,
            transitions_per_cycle=report.transitions_per_cycle,
            degraded_per_cycle=report.degraded_per_cycle,
            recoveries_per_cycle=report.recoveries_per_cycle,
            fast_mean_tok_s=report.fast_mean,
            degraded_mean_tok_s=report.degraded_mean,
            long_run_mean_tok_s=report.long_run_mean,
            share_degraded=report.share_degraded,
            score=report.score,
        )
        classes = iter(report.classes)
        phased: list[RequestRecord] = []
        for r in records:
            if r.outcome == "ok":
                phase = next(classes)  # a loop or garbled answer's is its neighbours': none
                r = _with_phase(r, phase) if r.quality is None else r
            phased.append(r)
        records = phased
        ok = [r for r in records if r.outcome == "ok"]

    duration = end - start if start is not None and end is not None and end > start else None
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    out_tokens = sum(r.completion_tokens or 0 for r in ok)
    itls = [x for s in stats if s.outcome == "ok" for x in s.itl_s]
    summary = Summary(
        completed=len(ok),
        failed=sum(1 for r in records if r.outcome == "failed"),
        duration_s=duration,
        total_input_tokens=in_tokens,
        total_output_tokens=out_tokens,
        request_throughput=len(ok) / duration if duration else None,
        output_throughput=out_tokens / duration if duration and ok else None,
        total_token_throughput=(in_tokens + out_tokens) / duration if duration and ok else None,
        ttft_ms=dist([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        tpot_ms=dist([r.tpot_ms for r in ok if r.tpot_ms is not None]),
        itl_ms=dist(itls).scaled(1000.0),
        e2el_ms=dist([r.e2el_ms for r in ok if r.e2el_ms is not None]),
        request_output_tok_s=dist([r.output_tok_s for r in ok if r.output_tok_s is not None]),
        decode_tok_s=dist([r.decode_tok_s for r in ok if r.decode_tok_s is not None]),
        vanilla_requests=sum(1 for r in ok if r.vanilla),
        loop_requests=sum(1 for r in ok if r.quality == "loop"),
        garbled_requests=sum(1 for r in ok if r.quality == "garbled"),
    )
    server_als = [r.server_al for r in ok if r.server_al is not None]
    client_als = [r.client_al for r in ok if r.client_al is not None]
    # Bench's own tokens against the server's: another client's traffic in the /metrics deltas
    own_tokens = sum(r.completion_tokens or 0 for r in records)
    server_tokens = spec_block.server_generation_tokens
    foreign = None
    if server_tokens is not None and server_tokens > 0:
        foreign = max(0.0, server_tokens - own_tokens) / server_tokens
    spec_block = SpecDecodeBlock(
        **{
            **{f: getattr(spec_block, f) for f in SpecDecodeBlock.__dataclass_fields__},
            "server_al_mean": sum(server_als) / len(server_als) if server_als else None,
            "client_al_mean": sum(client_als) / len(client_als) if client_als else None,
            "own_generation_tokens": own_tokens if server_tokens is not None else None,
            "foreign_share": foreign,
            "metrics_reliable": foreign is None or foreign <= FOREIGN_THRESHOLD,
        }
    )
    by_message: dict[str, int] = {}
    for r in records:
        if r.outcome == "failed":
            key = r.error or r.outcome
            by_message[key] = by_message.get(key, 0) + 1
    dead = marks.get(DEAD)
    errors = ErrorBlock(
        failed=summary.failed,
        cancelled=sum(1 for r in records if r.outcome == "cancelled"),
        by_message=by_message,
        engine_dead=dead is not None,
        engine_dead_reason=dead.label.split(": ", 1)[1] if dead and ": " in dead.label else None,
        engine_dead_after=(
            sum(1 for r in records if r.outcome == "ok" and _sent_before(r, start, dead.t))
            if dead is not None
            else None
        ),
        server_restarts=spec_block.counter_resets,
        interrupted=INTERRUPTED in marks,
    )
    gpu_name = server.gpu or next((b.name for b in gpu_blocks(run_gpus) if b.name), None)
    return BenchResult(
        server=ServerInfo(
            **{
                **{f: getattr(server, f) for f in ServerInfo.__dataclass_fields__},
                "n_spec": n_spec,
                "spec_configured": configured,
                "gpu": gpu_name,
            }
        ),
        config=config,
        summary=summary,
        spec_decode=spec_block,
        requests=tuple(records),
        errors=errors,
        gpu=gpu_blocks(run_gpus),
        cycle=cycle,
        label=label,
        created_at=created_at,
        specmon_version=specmon_version,
    )


def _keep_tail(parts: list[str], piece: str) -> None:
    """Append `piece`, keeping about the last MAX_TEXT_CHARS characters (what the sentinel
    reads) in a few parts: no copy of the whole text per chunk."""
    parts.append(piece)
    if len(parts) > 64:
        parts[:] = ["".join(parts)[-MAX_TEXT_CHARS:]]


def _with_quality(
    records: list[RequestRecord], texts: dict[str, list[str]], n_spec: int | None
) -> list[RequestRecord]:
    """The records with the quality sentinel's flag on each ok answer, in order, against the
    healthy AL of the unflagged answers before it (as a session judges them)."""
    healthy = HealthyAL()
    out: list[RequestRecord] = []
    for r in records:
        if r.outcome != "ok":
            out.append(r)
            continue
        al = r.acceptance_length
        text = "".join(texts.get(r.request_id, ()))[-MAX_TEXT_CHARS:]
        verdict = check_answer(r.request_id, None, text, r.completion_tokens, al, healthy, n_spec)
        if verdict is not None and verdict.flag is not None:
            out.append(replace(r, quality=verdict.flag))
            continue
        if verdict is not None and al is not None:
            healthy.add(al)
        out.append(r)
    return out


def _sent_before(r: RequestRecord, start: float | None, t: float) -> bool:
    return r.t_send_s is not None and (start or 0.0) + r.t_send_s <= t


def _with_phase(r: RequestRecord, phase: str) -> RequestRecord:
    return RequestRecord(
        **{**{f: getattr(r, f) for f in RequestRecord.__dataclass_fields__}, "phase": phase}
    )


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def _record(
    index: int,
    s: RequestStats,
    start: float | None,
    flagged: bool,
    reasons: tuple[tuple[str, str], ...],
    trace: RequestTrace,
) -> RequestRecord:
    server_al = s.server_spec.mean_acceptance_length if s.server_spec else None
    al, source = (
        (server_al, "server") if server_al is not None else (s.client_acceptance_length, "client")
    )
    itl = s.itl_s
    spec_raw = trace.ended.spec_decoding if trace.ended else None
    return RequestRecord(
        index=index,
        request_id=s.request_id,
        outcome=s.outcome,
        error=s.error,
        t_send_s=(s.t_send - start) if s.t_send is not None and start is not None else None,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        ttft_ms=_ms(s.ttft_s),
        tpot_ms=_ms(s.tpot_s),
        e2el_ms=_ms(s.e2el_s),
        itl_mean_ms=_ms(math.fsum(itl) / len(itl)) if itl else None,
        itl_count=len(itl),
        output_tok_s=s.e2e_tok_s,
        decode_tok_s=s.decode_tok_s,
        decode_chunks=s.decode_chunks,
        acceptance_length=al,
        al_source=source if al is not None else None,
        server_al=server_al,
        client_al=s.client_acceptance_length,
        per_position=server_per_position(spec_raw),
        vanilla=flagged,
        vanilla_reasons=reasons,
    )
