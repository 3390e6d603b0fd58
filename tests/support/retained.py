"""How much a bounded container holds, counted from outside (white-box: the memory tests read the
objects' own fields, so the app carries no counting code for them). A renamed field fails here
loudly, with the test that reads it."""

from __future__ import annotations

from specmon.core.diagnosis.state import Diagnosis
from specmon.core.fleet_state import FleetState
from specmon.core.session_state import SessionState
from specmon.ui.answer_feed import AnswerFeed


def feed_retained(feed: AnswerFeed) -> int:
    """Per-chunk items an answer's feed holds: chunks, undrained fragments and their arrival
    times."""
    with feed._lock:
        return len(feed._chunks) + len(feed._parts) + len(feed._arrivals)


def diagnosis_retained(diagnosis: Diagnosis) -> int:
    """Objects in the diagnosis fold's rings and maps."""
    return (
        len(diagnosis.points)
        + len(diagnosis.recent_savings)
        + len(diagnosis.flagged)
        + sum(len(p) for p in diagnosis.texts.values())
    )


def fleet_retained(fleet: FleetState) -> int:
    """History points the fleet keeps over all its targets."""
    return sum(len(t.range_points) + len(t.recent) for t in fleet._targets.values())


def session_retained(state: SessionState) -> dict[str, int]:
    """How many objects each bounded container of the session state holds."""
    servers = state._servers.values()
    return {
        "rows": len(state._rows),
        "in_flight": len(state._in_flight),
        "pending": len(state._pending),
        "markers": len(state._markers),
        "itl": len(state._itl),
        "speeds": len(state._speeds),
        "server_history": sum(len(s.history) for s in servers),
        "counter_points": sum(s.bank.points for s in servers),
        "gpu_history": sum(len(r) for r in state._gpu_history.values()),
        "resets": sum(len(s.resets) for s in servers),
        "log_tail": sum(len(s.log_tail) for s in servers),
        "fleet_history": fleet_retained(state._fleet),
        "diagnosis": diagnosis_retained(state._diagnosis),
    }
