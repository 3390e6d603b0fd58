"""Monitor.view(): the hub thread republishes the session's view on its own as events arrive (a
reader never asks for a rebuild), and a fresh read publishes the latest state at once."""

from __future__ import annotations

import threading

from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Monitor, Target


def test_published_view_follows_the_scrapes_without_fresh_reads(sim):
    with Monitor([Target(sim.url)], SessionState, interval=0.1) as monitor:
        monitor.start()
        first = monitor.view()
        wait = threading.Event()
        for _ in range(200):  # up to 20 s for a few scrapes to be folded and published
            view = monitor.view()
            server = view.server(sim.url)
            if server is not None and len(server.history.t) >= 3 and view is not first:
                break
            wait.wait(0.1)
        else:
            raise AssertionError("the published view never followed the scrapes")
        assert server.status == "up"
        assert view.simulated is True
        fresh = monitor.view(fresh=True)
        assert fresh.events >= view.events
