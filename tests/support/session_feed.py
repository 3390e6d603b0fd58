"""Event builders for session-state tests: spec-decode server scrapes, requests, GPU samples."""

from __future__ import annotations

from specmon.core import families
from specmon.core.events import (
    GpuReading,
    GpuSampled,
    MetricSample,
    MetricsScraped,
    RequestEnded,
    RequestStarted,
    StreamChunk,
)

SRC = "http://127.0.0.1:8000"
LAB = (("engine", "0"), ("model_name", "tiny"))


class Server:
    """Cumulative counters of a one-engine server with K draft positions."""

    def __init__(self, k: int = 4) -> None:
        self.k = k
        self.gen = 0.0
        self.drafts = 0.0
        self.accepted = 0.0
        self.per_pos = [0.0] * k
        self.running = 0.0

    def step(self, accepted: int) -> None:
        """One verify step that accepted `accepted` drafts (emits accepted + 1 tokens)."""
        self.drafts += 1
        self.accepted += accepted
        self.gen += accepted + 1
        for i in range(accepted):
            self.per_pos[i] += 1

    def samples(self) -> tuple[MetricSample, ...]:
        out = [
            MetricSample(families.GENERATION_TOKENS, LAB, self.gen),
            MetricSample(families.PROMPT_TOKENS, LAB, 0.0),
            MetricSample(families.SPEC_DRAFTS, LAB, self.drafts),
            MetricSample(families.SPEC_DRAFT_TOKENS, LAB, self.drafts * self.k),
            MetricSample(families.SPEC_ACCEPTED, LAB, self.accepted),
            MetricSample(families.REQUESTS_RUNNING, LAB, self.running),
            MetricSample(families.REQUESTS_WAITING, LAB, 0.0),
            MetricSample(families.KV_CACHE_USAGE, LAB, 0.25),
        ]
        for i, v in enumerate(self.per_pos):
            out.append(
                MetricSample(families.SPEC_ACCEPTED_PER_POS, (*LAB, ("position", str(i))), v)
            )
        return tuple(out)

    def scrape(self, t: float, source: str = SRC) -> MetricsScraped:
        return MetricsScraped(t=t, source=source, samples=self.samples())


def request_events(
    rid: str,
    t0: float,
    *,
    tokens_per_step: int,
    steps: int,
    step_s: float,
    ttft: float = 0.1,
    outcome: str = "ok",
    source: str = SRC,
    server: Server | None = None,
    max_tokens: int | None = 1024,
):
    """A request: send, role chunk, the prefill token, then `steps` chunks of `tokens_per_step`
    tokens every `step_s`, then the end. Steps are also applied to `server` when given."""
    events: list = [
        RequestStarted(t=t0, request_id=rid, source=source, model="tiny", max_tokens=max_tokens)
    ]
    t = t0 + ttft
    events.append(StreamChunk(t=t, request_id=rid, role="assistant", completion_tokens=0))
    events.append(StreamChunk(t=t, request_id=rid, text="a", completion_tokens=1))
    cum = 1
    if server is not None:
        server.gen += 1
    for _ in range(steps):
        t += step_s
        cum += tokens_per_step
        if server is not None:
            server.step(tokens_per_step - 1)
        # ordinary text, not one letter repeated (the loop flag reads the text: a text of one
        # letter over and over is a loop)
        text = "".join(f" t{cum - tokens_per_step + j + 1}" for j in range(tokens_per_step))
        events.append(StreamChunk(t=t, request_id=rid, text=text, completion_tokens=cum))
    end = RequestEnded(
        t=t + 0.001,
        request_id=rid,
        outcome=outcome,
        completion_tokens=cum if outcome == "ok" else None,
        error=None if outcome == "ok" else "server closed the stream",
    )
    events.append(end)
    return events


def gpu_sample(t: float, *, temp: float = 60.0, reasons: tuple[str, ...] = ()) -> GpuSampled:
    return GpuSampled(
        t=t,
        source="gpu",
        gpus=(
            GpuReading(
                index=0,
                name="NVIDIA H100",
                temperature_c=temp,
                slowdown_temperature_c=90.0,
                memory_used_bytes=40 << 30,
                memory_total_bytes=80 << 30,
                utilization_pct=90.0,
                power_w=500.0,
                power_limit_w=700.0,
                sm_clock_mhz=1980.0,
                memory_clock_mhz=2619.0,
                clock_event_reasons=reasons,
            ),
        ),
    )
