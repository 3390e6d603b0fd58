"""Live == replay: a session recorded live against the simulator (through the Monitor, the
runtime the app's collector runs) keeps the live view's numbers at its end; the recording played
to its end through the replay engine (ReplaySession, what the replay screen reads) shows the same
numbers: the same view, field for field, and the same text in every section of the dashboard's
panel, the same answers table and the same numbers under the last answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.core.clock import FakeClock
from specmon.core.events import Marker
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.runtime.monitor import Monitor, Target
from specmon.runtime.prompt_loop import prompt_loop
from specmon.runtime.replay_session import ReplaySession
from specmon.sources.recording_player import read_recording
from specmon.sources.stream_client import ChatRequest
from specmon.ui.screens.replay import last_answer, table_rows
from specmon.ui.widgets.side_panel import panel_sections
from specmon.ui.widgets.turn import format_numbers


def _record_live(path: Path) -> SessionView:
    from specmon.sim.server import SimConfig, start_in_thread

    config = SimConfig(speed=50.0, n_spec=8, schedule="cycle:5f,1t,3d,1r", seed=3)
    with start_in_thread(config, log_sink=lambda _l: None) as sim:
        monitor = Monitor([Target(sim.url)], SessionState, interval=0.2, record=path)
        monitor.start()
        hub = monitor.hub
        requests = [ChatRequest(f"prompt {i}", max_tokens=48) for i in range(3)]
        hub.submit(
            prompt_loop(
                monitor.clients[0], requests, hub.emit, scraper=monitor.scrapers[0], count=12
            )
        ).result(120)
        hub.post(Marker(hub.clock(), "the end of the run"))
        monitor.stop()  # every event folded live is now in the recording, and no more come
        assert monitor.state is not None
        return monitor.state.publish()


def _shown(view: SessionView) -> dict[str, object]:
    """What the screen shows from a view: each panel section's text and styles (graphs left
    empty: the live app samples them on wall-clock seconds), the answers table, the numbers
    under the last answer."""
    answer = last_answer(view)
    return {
        "panel": [
            (name, text.plain, [(s.start, s.end, str(s.style)) for s in text.spans])
            for name, text in panel_sections(view, answer)
        ],
        "table": table_rows(view, 0.0),
        "answer": format_numbers(answer) if answer is not None else None,
    }


@pytest.mark.parametrize("name", ["live.ndjson", "live.ndjson.gz"])
def test_the_replay_shows_what_was_shown_live(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    live = _record_live(path)
    assert live.summary.total == 12
    assert sum(1 for r in live.rows if r.speed_class and r.speed_class.kind != "ok") >= 3

    recording = read_recording(path)
    assert recording.problems == []
    info = recording.info
    session = ReplaySession(info, recording.events, lambda: SessionState(info), clock=FakeClock())
    session.seek(session.end / 2)
    session.seek(session.end)  # forward from the middle, as a user would
    replayed = session.view()
    assert session.position().events_applied == live.events == len(recording.events)

    assert replayed == live  # every number of the view
    shown, shown_live = _shown(replayed), _shown(live)
    assert shown == shown_live
    panel = dict((n, t) for n, t, _ in shown["panel"])  # type: ignore[misc]
    assert "answers          12" in panel["flags"]
    assert "vanilla-speed" in panel["flags"]
    assert len(shown["table"]) == 12  # type: ignore[arg-type]

    # and after a backward seek (the state rebuilt from the start), the same again
    session.seek(0.0)
    session.seek(session.end)
    assert session.rebuilds == 1
    assert _shown(session.view()) == shown_live
