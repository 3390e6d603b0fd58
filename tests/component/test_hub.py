"""The hub: events fan out in arrival order, readers never see a half-applied event, shutdown is
clean (tasks cancelled, closers run, thread joined), and failures of one part do not stop others."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from specmon.core.clock import FakeClock
from specmon.core.events import Marker
from specmon.runtime.hub import Hub, SessionClock


def test_session_clock_counts_from_the_start():
    base = FakeClock(1000.0)
    clock = SessionClock(base)
    assert clock() == 0.0
    base.advance(2.5)
    assert clock() == 2.5


def test_events_reach_every_subscriber_in_arrival_order_on_the_hub_thread():
    seen_a: list[str] = []
    seen_b: list[str] = []
    threads: set[str] = set()
    with Hub(clock=FakeClock()) as hub:

        def a(event):
            threads.add(threading.current_thread().name)
            seen_a.append(event.label)

        hub.subscribe(a)
        hub.subscribe(lambda e: seen_b.append(e.label))

        async def source(emit):
            for i in range(200):
                emit(Marker(float(i), f"e{i}"))
                if i % 10 == 0:
                    await asyncio.sleep(0)

        hub.run_source(source).result(10)
    expected = [f"e{i}" for i in range(200)]
    assert seen_a == expected
    assert seen_b == expected
    assert threads == {"specmon-hub"}


def test_a_failing_subscriber_is_noted_and_does_not_stop_the_others():
    seen: list[str] = []
    with Hub(clock=FakeClock()) as hub:

        def broken(event):
            raise RuntimeError("boom")

        hub.subscribe(broken)
        hub.subscribe(lambda e: seen.append(e.label))
        hub.run_source(lambda emit: _emit_two(emit)).result(10)
        assert any("boom" in e for e in hub.errors)
    assert seen == ["a", "b"]


async def _emit_two(emit):
    emit(Marker(0.0, "a"))
    emit(Marker(1.0, "b"))


def test_read_sees_whole_events_only():
    """A reader on another thread never observes a subscriber halfway through an event."""
    # Switch threads very often, so an unlocked read would catch apply() halfway (it does:
    # thousands of torn reads without the lock).
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        _read_while_applying()
    finally:
        sys.setswitchinterval(old)


def _read_while_applying():

    class Pair:
        def __init__(self):
            self.x = 0
            self.y = 0

        def apply(self, event):
            self.x += 1
            for _ in range(50):
                pass
            self.y += 1

        def snapshot(self):
            return (self.x, self.y)

    state = Pair()
    with Hub(clock=FakeClock()) as hub:
        hub.subscribe(state.apply)

        async def source(emit):
            for i in range(20000):
                emit(Marker(float(i), ""))
                if i % 100 == 0:
                    await asyncio.sleep(0)

        fut = hub.run_source(source)
        torn = 0
        while not fut.done():
            x, y = hub.read(state.snapshot)
            torn += x != y
        fut.result()
    assert torn == 0
    assert state.snapshot() == (20000, 20000)


def test_stop_cancels_running_sources_runs_closers_and_joins_the_thread():
    cancelled = threading.Event()
    closed: list[str] = []
    hub = Hub(clock=FakeClock()).start()

    async def forever(emit):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def aclose():
        closed.append("async")

    hub.add_closer(lambda: closed.append("sync"))
    hub.add_closer(aclose)
    fut = hub.run_source(forever)
    thread = hub._thread
    hub.stop()
    assert cancelled.is_set()
    assert fut.cancelled()
    assert closed == ["async", "sync"]  # newest first
    assert thread is not None and not thread.is_alive()
    assert not hub.running


def test_submit_from_another_thread_and_post_are_thread_safe():
    seen: list[str] = []
    with Hub(clock=FakeClock()) as hub:
        hub.subscribe(lambda e: seen.append(e.label))

        async def job(n):
            return n * 2

        results = []

        def worker(k):
            results.append(hub.submit(job(k)).result(10))
            hub.post(Marker(float(k), f"w{k}"))

        workers = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        hub.submit(asyncio.sleep(0)).result(10)  # posts queued before this have run
    assert sorted(results) == [k * 2 for k in range(8)]
    assert sorted(seen) == sorted(f"w{k}" for k in range(8))


def test_submit_before_start_is_a_clear_error():
    hub = Hub(clock=FakeClock())
    coro = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="not started"):
        hub.submit(coro)
    coro.close()
