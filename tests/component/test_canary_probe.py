"""The canary probe against the simulator: it learns the baseline on its first probes, stores it,
never probes an idle server, and flags the engine as drifted when the simulator's acceptance
falls (a `drop-at:N` schedule: every request from the N-th on is degraded)."""

from __future__ import annotations

import asyncio
import json
import time

from tests.support.canary import canary_rounds

from specmon.core.canary import LEARN_PROBES, CanaryKey, CanaryTracker
from specmon.core.events import CanaryProbed, MetricSample, MetricsScraped
from specmon.runtime.canary import CanaryProbe
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.canary_store import CanaryStore
from specmon.sources.stream_client import ChatRequest, StreamClient


def _sim_key(url: str) -> CanaryKey:
    return CanaryKey(server=url, model="", draft=None, method="sim", n_spec=8)


ROUNDS_BEFORE_DROP = LEARN_PROBES + 1
"""Rounds of (one live request, one probe) before the drop: learning, then one judged probe."""


def _config(schedule: str | None) -> SimConfig:
    return SimConfig(
        speed=200.0,
        n_spec=8,
        seed=3,
        schedule=schedule,
        per_request_spec_decode_metrics="summary",
    )


def test_the_canary_learns_then_flags_drift_and_suggests_a_restart(tmp_path):
    store = CanaryStore(tmp_path / "canary.json")
    # live request = odd number, canary = even: the drop hits both from round 7 on
    drop_at = 2 * ROUNDS_BEFORE_DROP + 1
    with start_in_thread(_config(f"drop-at:{drop_at}"), log_sink=lambda _l: None) as sim:
        events = asyncio.run(
            canary_rounds(sim.url, store, _sim_key(sim.url), ROUNDS_BEFORE_DROP + 2)
        )
    probes = [e for e in events if isinstance(e, CanaryProbed)]
    assert len(probes) == ROUNDS_BEFORE_DROP + 2
    assert all(p.outcome == "ok" and p.acceptance_length is not None for p in probes)
    learning, judged = probes[:LEARN_PROBES], probes[LEARN_PROBES:]
    assert [p.learned_probes for p in learning] == list(range(LEARN_PROBES))
    assert all(p.expected_al is None for p in learning)
    assert all(p.expected_al is not None and p.tolerance is not None for p in judged)
    tracker = CanaryTracker()
    statuses = []
    for p in probes:
        tracker.apply(p)
        statuses.append(tracker.views()[0].status)
    assert statuses[:LEARN_PROBES] == ["learning"] * LEARN_PROBES
    assert statuses[LEARN_PROBES:] == ["ok", "drifting", "drifted"]
    view = tracker.views()[0]
    assert view.diagnosis == "engine_drift"
    assert view.advice is not None and "restart" in view.advice
    # the live traffic's AL is reported apart from the canary's
    assert all(p.live_acceptance_length is not None for p in probes)
    # the baseline was stored and a later session judges its first probe against it
    key = CanaryKey(server=sim.url, model="", draft=None, method="sim", n_spec=8)
    stored = store.get(key)
    assert stored.learned and len(stored.probes) == LEARN_PROBES


def test_an_idle_server_is_never_probed(tmp_path):
    store = CanaryStore(tmp_path / "canary.json")
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        events = asyncio.run(canary_rounds(sim.url, store, _sim_key(sim.url), 3, live=False))
        started = sim.server.app.engine.requests_started
    assert events == []
    assert started == 0  # no phantom batch: the canary sent nothing
    assert not (tmp_path / "canary.json").exists()


def test_a_stored_baseline_judges_the_first_probe_of_a_new_session(tmp_path):
    store = CanaryStore(tmp_path / "canary.json")
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        asyncio.run(canary_rounds(sim.url, store, _sim_key(sim.url), LEARN_PROBES))
        later = asyncio.run(canary_rounds(sim.url, store, _sim_key(sim.url), 1))
    (probe,) = later
    assert isinstance(probe, CanaryProbed)
    assert probe.learned_probes == LEARN_PROBES and probe.expected_al is not None


def test_watch_s_canary_runs_on_the_hub_is_recorded_and_replays(tmp_path):
    """The wiring of `watch --canary`: start_canaries on a started monitor probes while live
    traffic runs, the view and the recording carry the probes, the canary is not an answer."""
    from specmon.core.session_state import SessionState
    from specmon.runtime.canary import start_canaries
    from specmon.runtime.monitor import Monitor, Target
    from specmon.runtime.prompt_loop import prompt_loop
    from specmon.sources.recording_player import RecordingPlayer, read_recording

    path = tmp_path / "watch.ndjson"
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        monitor = Monitor([Target(sim.url)], SessionState, interval=0.1, record=path)
        monitor.start()
        store = CanaryStore(tmp_path / "canary.json")
        (probe,) = start_canaries(monitor, 0.05, store=store, check_s=0.05)
        hub = monitor.hub
        requests = [ChatRequest(f"prompt {i}", max_tokens=64) for i in range(3)]
        deadline = time.monotonic() + 60
        live = monitor.snapshot()
        while not live["canary"] and time.monotonic() < deadline:
            hub.submit(
                prompt_loop(
                    monitor.clients[0], requests, hub.emit, scraper=monitor.scrapers[0], count=3
                )
            ).result(60)
            time.sleep(0.3)
            live = monitor.snapshot()
        monitor.stop()  # then the final state: a probe may have come after the last snapshot
        assert monitor.state is not None
        live = monitor.state.snapshot()
    (canary,) = live["canary"]
    assert canary["source"] == probe.source and canary["probes"] >= 1
    assert canary["status"] in ("learning", "ok")  # the simulator does not drift here
    assert all(r["request_id"] != "canary" for r in live["requests"]["rows"])
    recording = read_recording(path)
    assert any(isinstance(e, CanaryProbed) for e in recording.events)
    replayed = SessionState(recording.info)
    asyncio.run(RecordingPlayer(path).run(replayed.apply))
    assert replayed.snapshot()["canary"] == live["canary"]


def test_a_refused_stored_baseline_is_said_not_silently_relearned(tmp_path):
    """A stored entry whose AL is not one for its K (1e308 here) is skipped by the loader: the
    first probe says so in one line, and the baseline learned again is stored sane."""
    path = tmp_path / "canary.json"
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        key = _sim_key(sim.url)
        path.write_text(
            json.dumps(
                {
                    "format": "specmon-canary",
                    "version": 1,
                    "baselines": {key.id(): {"probes": [3.0] * LEARN_PROBES, "live": [1e308]}},
                }
            )
        )
        events = asyncio.run(canary_rounds(sim.url, CanaryStore(path), key, 2))
    first, second = events
    assert isinstance(first, CanaryProbed) and isinstance(second, CanaryProbed)
    assert first.outcome == "ok" and first.learned_probes == 0  # learned again ...
    assert first.error is not None and "\n" not in first.error  # ... and said, in one line
    assert first.error.startswith("stored canary baseline refused, learned again: ")
    assert str(path) in first.error and "`live` holds 1e+308, not an AL" in first.error
    assert second.error is None  # said once
    reread = CanaryStore(path)
    assert len(reread.get(key).probes) == 2 and reread.skipped == {}


def test_an_absurd_live_al_is_ignored_not_stored(tmp_path):
    """Garbage counters give a live AL of 1e308: it is not shown, judged or learned (the store
    would refuse it next time), and the probe says why."""
    store = CanaryStore(tmp_path / "canary.json")
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        key = _sim_key(sim.url)

        async def one_probe() -> CanaryProbed | None:
            async with StreamClient(sim.url) as client:
                probe = CanaryProbe(client, key, interval_s=0.0, clock=time.monotonic, store=store)
                for tokens, drafts, accepted in ((0.0, 0.0, 0.0), (500.0, 1.0, 1e308)):
                    probe.observe(
                        MetricsScraped(0.0, client.source, _counters(tokens, drafts, accepted))
                    )
                return await probe.tick(lambda _e: None)

        event = asyncio.run(one_probe())
    assert event is not None and event.outcome == "ok" and event.acceptance_length is not None
    assert event.live_acceptance_length is None
    assert event.error is not None and event.error.startswith(
        "live acceptance length from /metrics ignored: 1e+308, not an AL for K = 8"
    )
    reread = CanaryStore(store.path)
    assert reread.get(key).live == () and len(reread.get(key).probes) == 1
    assert reread.skipped == {}


def _counters(tokens: float, drafts: float, accepted: float) -> tuple[MetricSample, ...]:
    labels = (("engine", "0"),)
    return (
        MetricSample("vllm:generation_tokens_total", labels, tokens),
        MetricSample("vllm:spec_decode_num_drafts_total", labels, drafts),
        MetricSample("vllm:spec_decode_num_accepted_tokens_total", labels, accepted),
    )


def test_the_canary_can_be_told_to_learn_its_baseline_again(tmp_path):
    """A stored baseline (here one learned in a slow stretch) is set aside with `relearn`: the
    first probes learn again, say so, and the new baseline replaces the stored one."""
    from specmon.core.canary import CanaryBaseline

    store = CanaryStore(tmp_path / "canary.json")
    with start_in_thread(_config(None), log_sink=lambda _l: None) as sim:
        key = _sim_key(sim.url)
        store.put(key, CanaryBaseline((1.0,) * LEARN_PROBES))
        kept = asyncio.run(canary_rounds(sim.url, store, key, 1))
        again = asyncio.run(canary_rounds(sim.url, store, key, LEARN_PROBES, relearn=True))
    first = kept[0]
    assert isinstance(first, CanaryProbed) and first.expected_al == 1.0
    probes = [e for e in again if isinstance(e, CanaryProbed)]
    assert all(p.expected_al is None for p in probes)
    assert probes[0].error is not None and "again" in probes[0].error
    stored = store.get(key)
    assert stored.learned and stored.expected_al is not None and stored.expected_al > 1.5


def test_probes_in_a_degraded_stretch_are_not_learned_as_the_baseline(tmp_path):
    """The canary's first probes fall in a degraded stretch (the simulator's requests 3-8; live
    request and probe alternate): the baseline is learned from the steady probes only."""
    store = CanaryStore(tmp_path / "canary.json")
    with start_in_thread(_config("cycle:2f,6d,40f"), log_sink=lambda _l: None) as sim:
        key = _sim_key(sim.url)
        events = asyncio.run(canary_rounds(sim.url, store, key, 10))
    probes = [e for e in events if isinstance(e, CanaryProbed)]
    als = [p.acceptance_length for p in probes]
    assert all(al is not None for al in als)
    slow = max(als[1:4])  # the probes of the degraded stretch
    fast = min(als[0:1] + als[4:])
    assert slow < 0.7 * fast  # the stretch is a real one
    stored = store.get(key)
    assert stored.learned and stored.expected_al is not None
    assert stored.expected_al > 0.9 * fast  # not the mean of fast and slow probes
    judged = [p for p in probes if p.expected_al is not None]
    assert judged and all(p.expected_al > 0.9 * fast for p in judged)
