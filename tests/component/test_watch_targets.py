"""Adding and removing watched servers while a session runs (runtime.monitor add_target /
remove_target through both LiveSession kinds): an added server gets a row and numbers, a removed
one leaves the view and its removal is in the recording, errors are one line."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from tests.support.loopback import SilentServer
from tests.support.waiting import wait_for

from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.recording_player import read_recording

WAIT_S = 30.0  # bound on waiting for a view; not a timing assertion


def _wait_view(session, predicate: Callable[[SessionView], bool]) -> SessionView:
    last: SessionView | None = None

    def ready() -> SessionView | None:
        nonlocal last
        last = session.view(fresh=True)
        return last if last is not None and predicate(last) else None

    return wait_for(
        ready,
        "the view's condition",
        timeout=WAIT_S,
        detail=lambda: f"servers: {last and last.servers}",
    )


@pytest.mark.parametrize("kind", [CollectorProcess])
def test_add_and_remove_a_server_while_watching(tmp_path, kind) -> None:
    path = tmp_path / "w.ndjson"
    with (
        start_in_thread(SimConfig(speed=50.0, seed=1), log_sink=lambda _l: None) as one,
        start_in_thread(SimConfig(speed=50.0, seed=2), log_sink=lambda _l: None) as two,
    ):
        config = SessionConfig(targets=(Target(one.url),), interval=0.2, record=str(path))
        session = kind(config, SessionState)
        session.start()
        try:
            _wait_view(session, lambda v: [s.source for s in v.servers] == [one.url])
            seen = session.add_target(Target(two.url))
            assert seen.base_url == two.url and seen.models
            assert [s.base_url for s in session.servers] == [one.url, two.url]
            view = _wait_view(
                session,
                lambda v: (s := v.server(two.url)) is not None and s.status == "up",
            )
            assert [s.source for s in view.servers] == [one.url, two.url]
            with pytest.raises(Exception, match="already watching"):
                session.add_target(Target(two.url))
            assert session.remove_target(two.url) == two.url
            _wait_view(session, lambda v: [s.source for s in v.servers] == [one.url])
            assert [s.base_url for s in session.servers] == [one.url]
            with pytest.raises(Exception, match="not watching"):
                session.remove_target(two.url)
            # The first server is still scraped after the removal.
            before = session.view(fresh=True).server(one.url).last_scrape_t
            _wait_view(session, lambda v: v.server(one.url).last_scrape_t != before)
            # And nothing of the removed one comes back.
            time.sleep(0.5)
            assert session.view(fresh=True).server(two.url) is None
        finally:
            session.stop()
        errors = session.errors
        assert not [e for e in errors if "watching" in e]  # refusals are answers, not errors
    recording = read_recording(path)
    removed = [
        e
        for e in recording.events
        if getattr(e, "status", None) == "removed" and e.source == two.url
    ]
    assert len(removed) == 1
    scraped_two = [e for e in recording.events if getattr(e, "source", None) == two.url]
    assert scraped_two[-1] is removed[0]  # the removal is the last event of that server


def test_a_refused_server_is_shown_down_from_the_start_and_when_added() -> None:
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, connection refused
    with start_in_thread(SimConfig(speed=50.0), log_sink=lambda _l: None) as one:
        session = CollectorProcess(
            SessionConfig(targets=(Target(one.url), Target(dead)), interval=0.2), SessionState
        )
        session.start()
        try:
            # Shown down with its error in the first views, not absent until the scraper gives up.
            view = _wait_view(session, lambda v: v.server(dead) is not None)
            assert view.server(dead).status == "down"
            assert view.server(dead).status_detail
            _wait_view(session, lambda v: (s := v.server(one.url)) is not None and s.status == "up")
            session.remove_target(dead)
            assert session.add_target(Target(dead)).base_url == dead
            view = _wait_view(
                session, lambda v: (s := v.server(dead)) is not None and s.status == "down"
            )
            assert view.server(dead).status_detail
            assert view.server(one.url).status == "up"
        finally:
            session.stop()


@pytest.mark.slow
def test_a_server_that_never_answers_is_down_at_once_and_the_other_keeps_updating() -> None:
    silent = SilentServer()
    try:
        with start_in_thread(SimConfig(speed=50.0), log_sink=lambda _l: None) as one:
            session = CollectorProcess(
                SessionConfig(targets=(Target(one.url),), interval=0.2), SessionState
            )
            session.start()
            try:
                _wait_view(session, lambda v: v.server(one.url) is not None)
                session.add_target(Target(silent.url))  # identified within a short bound
                view = _wait_view(session, lambda v: v.server(silent.url) is not None)
                hung = view.server(silent.url)
                assert hung.status == "down"
                assert "not identified" in hung.status_detail
                assert "timed out after 3 s reading /version" in hung.status_detail
                before = view.server(one.url).last_scrape_t
                _wait_view(session, lambda v: v.server(one.url).last_scrape_t != before)
                assert session.view(fresh=True).server(silent.url).status == "down"
            finally:
                session.stop()
    finally:
        silent.stop()
