"""Publishing views: rebuilt only when dirty and at most at the frame rate; a reader on another
thread sees only whole, consistent views while events are folded."""

from __future__ import annotations

import threading

import pytest
from tests.support.session_feed import SRC, Server, request_events

from specmon.core.events import SessionInfo
from specmon.core.publish import ViewPublisher
from specmon.core.session_state import SessionState


def test_rebuilds_only_when_dirty_and_due() -> None:
    pub = ViewPublisher(object, min_interval_s=0.05)
    assert pub.current is None
    assert pub.publish_if_due(0.0) is True  # dirty from the start
    first = pub.current
    assert first is not None
    assert pub.publish_if_due(1.0) is False  # nothing changed
    assert pub.current is first
    pub.mark_dirty()
    assert pub.publish_if_due(1.01) is True
    pub.mark_dirty()
    assert pub.publish_if_due(1.03) is False  # changed, but within 50 ms of the last rebuild
    assert pub.dirty
    assert pub.publish_if_due(1.06) is True
    assert pub.builds == 3


def test_state_publishes_on_demand_and_keeps_the_reference_until_the_next() -> None:
    state = SessionState(SessionInfo(server=SRC))
    assert state.published_view is None
    first = state.publish()
    assert state.published_view is first
    assert state.publish_if_due(10.0) is False  # nothing folded since
    for e in request_events("r1", 0.0, tokens_per_step=3, steps=5, step_s=0.01):
        state.apply(e)
    assert state.published_view is first  # folding does not touch the published view
    assert state.publish_if_due(10.0) is True
    view = state.published_view
    assert view is not None and view is not first and len(view.rows) == 1


@pytest.mark.slow
def test_a_reader_thread_sees_only_whole_states_while_events_are_folded() -> None:
    """The writer (standing in for the hub thread) folds requests and publishes after every
    event; the reader checks invariants that a half-built view would break."""
    state = SessionState(SessionInfo(server=SRC), max_requests=1000, publish_interval_s=0.0)
    server = Server(k=4)
    lock = threading.Lock()  # the hub's lock: only the writer takes it
    done = threading.Event()
    problems: list[str] = []
    seen: list[int] = []

    def read() -> None:
        last_events = -1
        while not done.is_set() or last_events < 0:
            view = state.published_view
            if view is None:
                continue
            s = view.summary
            if s.total != len(view.rows) or s.ok != len(view.rows) or s.rows_kept != s.total:
                problems.append(f"summary {s.total} vs {len(view.rows)} rows")
            if view.events < last_events:
                problems.append("views went back in time")
            ids = [r.request_id for r in view.rows]
            if ids != [f"r{i}" for i in range(len(ids))]:
                problems.append("rows out of order or missing")
            for r in view.in_flight:
                if r.outcome != "running":
                    problems.append("a finished request shown in flight")
            if (
                view.servers
                and view.servers[0].history.t
                and (len(view.servers[0].history.t) != len(view.servers[0].history.decode_tok_s))
            ):
                problems.append("history series of different lengths")
            last_events = view.events
            seen.append(view.events)

    reader = threading.Thread(target=read)
    reader.start()
    t = 0.0
    try:
        for i in range(300):
            events = request_events(
                f"r{i}", t, tokens_per_step=3, steps=4, step_s=0.001, server=server
            )
            for e in events:
                with lock:
                    state.apply(e)
                    state.publish_if_due(e.t)
            with lock:
                state.apply(server.scrape(t + 0.01))
                state.publish_if_due(t + 0.01)
            t += 0.02
    finally:
        done.set()
        reader.join(timeout=30)
    assert not reader.is_alive()
    assert problems == []
    assert len(set(seen)) > 1  # the reader saw the views change while folding went on
    final = state.published_view
    assert final is not None and final.summary.total == 300
