"""Deterministic session views for the dashboard's tests and snapshots: events folded by the
real SessionState, with fixed timestamps (no live timing)."""

from __future__ import annotations

from tests.support.session_feed import SRC, Server, gpu_sample, request_events

from specmon.core.diagnosis.context_cliff import ContextCliffView
from specmon.core.diagnosis.quality import QualityView
from specmon.core.diagnosis.seconds_saved import SecondsSavedView
from specmon.core.diagnosis.thermal import ClockFitView, ThermalView
from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView

INFO = SessionInfo(
    server=SRC,
    model="cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit",
    draft_model="z-lab/gemma-4-26B-A4B-it-DFlash",
    method="dflash",
    n_spec=8,
    vllm_version="0.20.2",
    simulated=True,
)

SEED_SPEEDS = (221.0, 214.0, 218.0, 222.0, 230.0, 103.0, 59.0, 62.0, 62.0, 212.0)


def session_view(
    *,
    speeds: tuple[float, ...] = SEED_SPEEDS,
    tokens_per_step: int | None = None,
    gpu: bool = True,
    hot: bool = False,
    prefix: str = "chat",
) -> SessionView:
    """A session of one request per speed, 10 s apart, each 50 chunks of `tokens_per_step`
    tokens; /metrics scraped before and after each; a GPU sample per request. Without
    `tokens_per_step`, each answer's acceptance goes with its speed, as in the seeds' cycle:
    4 tokens a step at 150 tok/s and more, 2 (the transition) from 80, 1 (drafts refused: the
    degraded answers) below."""
    state = SessionState(INFO, window_seconds=30.0)
    server = Server(k=8)
    t = 0.0
    state.apply(server.scrape(t))
    for i, speed in enumerate(speeds):
        n = tokens_per_step or (4 if speed >= 150 else 2 if speed >= 80 else 1)
        step = n / speed
        for e in request_events(
            f"{prefix}{i + 1}",
            t + 0.5,
            tokens_per_step=n,
            steps=50,
            step_s=step,
            server=server,
        ):
            state.apply(e)
        if gpu:
            reasons = ("sw_thermal_slowdown",) if hot else ()
            state.apply(gpu_sample(t + 1.0, temp=88.0 if hot else 61.0, reasons=reasons))
        t += 10.0
        state.apply(server.scrape(t))
    return state.publish()


# Quiet diagnosis sections: nothing to say yet.
QUIET_THERMAL = ThermalView(fit=ClockFitView(0, None, None, False), answers=0, slow=False)
NO_SAVING = SecondsSavedView(None, 0, 0, 0.0, 0.0, 0.0, ())
NO_QUALITY = QualityView(0, 0, 0, None, None, ())
NO_CONTEXT = ContextCliffView(bins=(), steps=0, detected=False)
