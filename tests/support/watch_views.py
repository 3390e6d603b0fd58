"""Deterministic views of a watch session with several servers, for the watch screen's tests and
snapshots: the real SessionState folds scrapes with fixed timestamps (no live timing)."""

from __future__ import annotations

from tests.support.fake_views import INFO
from tests.support.session_feed import Server, gpu_sample

from specmon.core.events import MetricSample, MetricsScraped, ServerStatusChanged
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView

A = "http://127.0.0.1:8000"
B = "http://10.0.0.7:8001"
C = "http://gpu-box-3:8000"


def _engine_page(servers: list[Server], running: list[float]) -> tuple[MetricSample, ...]:
    """One page with engine "0", "1", … (one Server each)."""
    out: list[MetricSample] = []
    for n, (s, r) in enumerate(zip(servers, running, strict=True)):
        s.running = r
        for x in s.samples():
            labels = tuple((k, str(n) if k == "engine" else v) for k, v in x.labels)
            out.append(MetricSample(x.name, labels, x.value))
    return tuple(out)


def watch_view(*, down: bool = True, restarted: bool = False, c_steps: int = 30) -> SessionView:
    """Three servers scraped every second for 20 s: A with two engines (AL 4 and 2), B with
    one engine (AL 3; down with an error at the end when `down`, restarted with counters from 0
    when `restarted`), C with one engine doing `c_steps` steps of AL 5 a second."""
    state = SessionState(INFO, window_seconds=10.0)
    a0, a1, b, c = Server(k=8), Server(k=8), Server(k=8), Server(k=8)
    for t in range(21):
        for _ in range(40):
            a0.step(3)
        for _ in range(20):
            a1.step(1)
        for _ in range(25):
            b.step(2)
        for _ in range(c_steps):
            c.step(4)
        state.apply(MetricsScraped(t=float(t), source=A, samples=_engine_page([a0, a1], [3, 1])))
        if t == 15 and restarted:
            state.apply(
                ServerStatusChanged(t=15.0, source=B, status="down", detail="ConnectError: refused")
            )
            b = Server(k=8)
        elif not (down and t == 20):
            b.running = 2
            state.apply(b.scrape(float(t), B))
        c.running = 1
        state.apply(c.scrape(float(t), C))
        state.apply(gpu_sample(float(t), temp=64.0))
    if down:
        state.apply(
            ServerStatusChanged(
                t=20.5,
                source=B,
                status="down",
                detail="3 failures in a row: ConnectError: [Errno 111] Connection refused",
            )
        )
    return state.publish()
