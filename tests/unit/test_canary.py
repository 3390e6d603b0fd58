"""The canary's pure logic (core.canary), its store (sources.canary_store), its place in the
recording and in `watch --json`, and `watch --canary`'s argument checks."""

from __future__ import annotations

import json

import pytest

from specmon.core.canary import (
    CONFIRM_PROBES,
    LEARN_PROBES,
    MIN_TOLERANCE_AL,
    CanaryBaseline,
    CanaryKey,
    CanaryTracker,
    LiveTraffic,
    Totals,
    live_since,
    should_probe,
    totals_of,
)
from specmon.core.events import CanaryProbed, MetricSample, SessionInfo
from specmon.core.recording_format import EventDecoder, EventEncoder
from specmon.core.session_state import SessionState
from specmon.sources.canary_store import CanaryStore, CanaryStoreError, default_path

KEY = CanaryKey(server="http://h:8000", model="m", draft="d", method="dflash", n_spec=8)


def _learned(*als: float) -> CanaryBaseline:
    b = CanaryBaseline()
    for al in als:
        b = b.with_probe(al, 3.0)
    return b


def _statuses(*als: float) -> list[str]:
    """Each probe judged by the baseline in force, then taught to it (runtime.canary's way)."""
    b, tracker, out = CanaryBaseline(), CanaryTracker(), []
    for i, al in enumerate(als):
        tracker.apply(
            CanaryProbed(
                t=float(i),
                source="http://h",
                acceptance_length=al,
                expected_al=b.expected_al,
                tolerance=b.tolerance,
                learned_probes=len(b.probes),
            )
        )
        out.append(tracker.views()[0].status)
        b = b.with_probe(al, None)
    return out


def test_a_slow_stretch_is_never_learned_as_the_baseline():
    """Probes taken while the server ran degraded (AL 1.0 among 3.5s) are not the baseline:
    it is the highest group of agreeing probes, and none while a probe lies far above it."""
    assert not _learned(3.53, 1.0, 3.74, 1.0, 1.0).learned
    assert not _learned(3.53, 1.0, 3.74, 1.0, 1.0, 1.0, 1.0).learned  # 3.5s seen: not steady
    b = _learned(3.53, 1.0, 3.74, 1.0, 1.0, 3.6, 3.5, 3.55)
    assert b.learned and b.expected_al == pytest.approx((3.53 + 3.74 + 3.6 + 3.5 + 3.55) / 5)
    assert b.with_probe(1.0, 1.0) == b  # the drift still teaches nothing
    assert _statuses(3.53, 1.0, 3.74, 1.0, 1.0, 1.0, 1.0)[-1] == "learning"


def test_a_baseline_learned_in_a_slow_stretch_is_learned_again_higher():
    b = _learned(*[1.2] * LEARN_PROBES)
    assert b.learned and b.expected_al == pytest.approx(1.2)
    b = b.with_probe(3.5, 3.0)
    assert not b.learned  # a probe far above: the slow baseline is learned again
    for _ in range(LEARN_PROBES - 1):
        b = b.with_probe(3.5, 3.0)
    assert b.learned and b.expected_al == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("learning", "healthy"),
    [
        ((2.5, 3.5, 3.0, 2.6, 3.4), 3.0),  # noisy probes: never a tolerance of 30 % and more
        ((3.53, 1.0, 3.74, 1.0, 1.0), 3.6),  # a slow stretch among the learning probes
        ((3.0, 3.5, 3.0, 3.5, 3.0), 3.25),
        ((1.3, 1.5, 1.4, 1.35, 1.5), 1.4),
    ],
)
def test_the_canary_is_never_ok_30_percent_below_its_healthy_al(learning, healthy):
    steady = [healthy] * LEARN_PROBES
    statuses = _statuses(*learning, *steady, 0.7 * healthy, 0.6 * healthy, 0.5 * healthy)
    assert "ok" not in statuses[-3:]


def test_the_baseline_learns_its_first_probes_then_holds():
    b = _learned(3.4, 3.5, 3.3, 3.4, 3.4)
    assert b.learned and b.expected_al == pytest.approx(3.4)
    assert b.tolerance == pytest.approx(max(MIN_TOLERANCE_AL, 3 * b.spread))
    assert b.with_probe(1.2, 1.0) == b  # a drifting engine does not teach the baseline
    assert not _learned(3.4, 3.4).learned and _learned(3.4, 3.4).tolerance is None
    steady = _learned(*[3.0] * LEARN_PROBES)
    assert steady.tolerance == MIN_TOLERANCE_AL  # no spread: the floor


@pytest.mark.parametrize(
    "value",
    [None, [], {"probes": "x"}, {"probes": [0.5]}, {"probes": [True]}, {"probes": [1e9]}],
    ids=repr,
)
def test_a_stored_baseline_that_is_not_one_is_refused(value):
    with pytest.raises(ValueError):
        CanaryBaseline.from_json(value)


def _samples(tokens: float, drafts: float, accepted: float) -> tuple[MetricSample, ...]:
    return (
        MetricSample("vllm:generation_tokens_total", (("engine", "0"),), tokens),
        MetricSample("vllm:spec_decode_num_drafts_total", (("engine", "0"),), drafts),
        MetricSample("vllm:spec_decode_num_accepted_tokens_total", (("engine", "0"),), accepted),
    )


def test_live_traffic_leaves_the_canary_s_own_tokens_and_steps_out():
    before = totals_of(_samples(1000, 100, 200))
    after = totals_of(_samples(1300, 150, 300))
    live = live_since(before, after, canary_tokens=100, canary_drafts=25, canary_accepted=75)
    assert live.tokens == 200
    assert live.acceptance_length == pytest.approx(1 + 25 / 25)
    only_canary = live_since(before, after, canary_tokens=300)
    assert only_canary.tokens == 0
    assert live_since(None, after) == LiveTraffic(None, None)
    restarted = live_since(after, totals_of(_samples(50, 5, 10)))
    assert restarted.tokens == 50  # a counter reset counts from 0, never negative


def test_an_idle_server_is_not_probed():
    assert should_probe(LiveTraffic(0.0, None), since_last_s=None, interval_s=60)[0] is False
    assert should_probe(LiveTraffic(None, None), since_last_s=None, interval_s=60)[0] is False
    assert should_probe(LiveTraffic(5.0, 2.0), since_last_s=30, interval_s=60)[0] is False
    assert should_probe(LiveTraffic(5.0, 2.0), since_last_s=60, interval_s=60) == (True, "")
    assert should_probe(LiveTraffic(5.0, None), since_last_s=None, interval_s=60)[0] is True
    assert totals_of(()) == Totals()


def _probe(t: float, al: float | None, *, live: float | None = 3.0, **kw) -> CanaryProbed:
    base = {"expected_al": 3.4, "tolerance": 0.2, "learned_probes": LEARN_PROBES}
    base.update(kw)
    return CanaryProbed(
        t=t,
        source="http://h",
        acceptance_length=al,
        live_acceptance_length=live,
        live_reference=3.0,
        **base,
    )


def test_drift_needs_confirming_probes_and_a_recovery_clears_it():
    tracker = CanaryTracker()
    seen = []
    for i, al in enumerate([3.4, 3.1, 3.0, 2.9, 3.35]):
        tracker.apply(_probe(float(i), al))
        seen.append((tracker.views()[0].status, tracker.views()[0].consecutive_drift))
    assert seen == [("ok", 0), ("drifting", 1), ("drifted", 2), ("drifted", 3), ("ok", 0)]
    assert CONFIRM_PROBES == 2


def test_a_workload_change_is_told_apart_from_engine_drift():
    tracker = CanaryTracker()
    tracker.apply(_probe(0.0, 3.4, live=1.9))  # live AL fell, the canary held
    view = tracker.views()[0]
    assert (view.status, view.diagnosis, view.advice) == ("ok", "workload_change", None)
    tracker.apply(_probe(1.0, 3.38, live=3.1))
    assert tracker.views()[0].diagnosis == "steady"


def test_a_failed_probe_keeps_the_judgement_and_says_why():
    tracker = CanaryTracker()
    tracker.apply(_probe(0.0, 3.4))
    tracker.apply(CanaryProbed(t=1.0, source="http://h", outcome="failed", error="HTTP 503: x"))
    view = tracker.views()[0]
    assert view.status == "failed" and view.error == "HTTP 503: x" and view.probes == 2
    assert view.acceptance_length == 3.4


def test_the_history_is_bounded():
    tracker = CanaryTracker()
    for i in range(1000):
        tracker.apply(_probe(float(i), 3.4))
    assert len(tracker.views()[0].history) == 64


def test_a_probe_round_trips_the_recording_and_replays_into_watch_json():
    event = _probe(2.0, 2.9)
    line = EventEncoder().encode(event)
    assert line[1] == "cn"
    back = EventDecoder().decode(json.loads(json.dumps(line)))
    assert back == event
    state = SessionState(SessionInfo())
    state.apply(_probe(1.0, 3.0))
    state.apply(back)
    (canary,) = state.snapshot()["canary"]
    assert canary["status"] == "drifted" and canary["diagnosis"] == "engine_drift"
    assert canary["expected_acceptance_length"] == 3.4 and "restart" in canary["advice"]
    assert SessionState(SessionInfo()).snapshot()["canary"] == []


def test_a_recorded_probe_with_a_key_in_its_url_or_error_is_scrubbed():
    event = CanaryProbed(
        t=1.0, source="http://user:pw@h:8000", outcome="failed", error="bad key sk-abcdef123456"
    )
    line = EventEncoder(secrets=("sk-abcdef123456",)).encode(event)
    text = json.dumps(line)
    assert "pw@" not in text and "sk-abcdef123456" not in text


# ---------------------------------------------------------------- the store


def test_the_store_lives_under_xdg_data():
    assert default_path({"XDG_DATA_HOME": "/data"}).as_posix() == "/data/specmon/canary.json"


def test_the_store_round_trips_and_forgets(tmp_path):
    store = CanaryStore(tmp_path / "sub" / "canary.json")
    assert store.get(KEY) == CanaryBaseline()
    learned = _learned(3.4, 3.5, 3.3, 3.4, 3.4)
    store.put(KEY, learned)
    assert CanaryStore(store.path).get(KEY) == learned
    assert store.forget(KEY) and store.get(KEY) == CanaryBaseline() and not store.forget(KEY)


def test_a_damaged_store_is_named_and_never_overwritten(tmp_path):
    path = tmp_path / "canary.json"
    path.write_text("{not json")
    store = CanaryStore(path)
    with pytest.raises(CanaryStoreError, match="not valid JSON"):
        store.put(KEY, _learned(3.0))
    assert path.read_text() == "{not json"
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(CanaryStoreError, match="not a specmon canary file"):
        store.load()


def test_one_bad_entry_is_skipped_and_the_others_kept(tmp_path):
    path = tmp_path / "canary.json"
    good = _learned(3.4, 3.4)
    path.write_text(
        json.dumps(
            {
                "format": "specmon-canary",
                "version": 1,
                "baselines": {KEY.id(): good.to_json(), "bad": {"probes": ["x"]}},
            }
        )
    )
    store = CanaryStore(path)
    assert store.load() == {KEY.id(): good}
    assert list(store.skipped) == ["bad"] and str(path) in store.skipped["bad"]


ABSURD_ALS = [float("nan"), float("inf"), -1.0, 0.5, KEY.n_spec + 1.5, 1e308]
"""Not an AL for KEY's K = 8 (1 to 9)."""


@pytest.mark.parametrize("al", ABSURD_ALS, ids=repr)
@pytest.mark.parametrize("part", ["probes", "live"])
def test_the_store_never_writes_an_al_its_loader_refuses(tmp_path, al, part):
    path = tmp_path / "canary.json"
    store = CanaryStore(path)
    store.put(KEY, _learned(3.4))
    before = path.read_text()
    bad = CanaryBaseline((3.4, al), (3.0,)) if part == "probes" else CanaryBaseline((3.4,), (al,))
    with pytest.raises(CanaryStoreError, match=f"not written to .*`{part}` holds"):
        store.put(KEY, bad)
    assert path.read_text() == before  # nothing written
    # the loader's rule is the writer's: what was refused would have been skipped on reading
    with pytest.raises(ValueError, match=f"`{part}` holds"):
        CanaryBaseline.from_json(bad.to_json(), KEY.n_spec)


def test_the_loader_holds_a_stored_al_to_its_key_s_k(tmp_path):
    """An AL above K + 1 cannot happen (K drafts accepted plus the target's token): refused for
    the key's K (8 here), kept where the key says no K (up to MAX_AL)."""
    no_k = CanaryKey(server="http://h:8000", model="m", draft=None, method=None, n_spec=None)
    path = tmp_path / "canary.json"
    entry = {"probes": [9.5], "live": []}
    path.write_text(
        json.dumps(
            {
                "format": "specmon-canary",
                "version": 1,
                "baselines": {KEY.id(): entry, no_k.id(): entry},
            }
        )
    )
    store = CanaryStore(path)
    assert store.load() == {no_k.id(): CanaryBaseline((9.5,))}
    assert list(store.skipped) == [KEY.id()]
    assert "9.5, not an AL for K = 8 (1 to 9)" in store.skipped[KEY.id()]


# ---------------------------------------------------------------- watch --canary


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--canary", "1"], "from 10"),
        (["--canary", "nan"], "from 10"),
        (["--canary", "--once"], "--once"),
        (["--canary-relearn"], "--canary-relearn goes with --canary"),
    ],
)
def test_watch_canary_refuses_what_it_cannot_do(extra, words, capsys):
    from specmon.cli.main import main

    code = main(["watch", "--attach", "http://127.0.0.1:9", "--json", *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_watch_canary_does_not_go_with_prometheus(capsys):
    from specmon.cli.main import main

    code = main(["watch", "--prometheus", "http://127.0.0.1:9", "--json", "--canary"])
    assert code == 2 and "--attach" in capsys.readouterr().err


def test_a_recorded_probe_with_a_wider_tolerance_is_judged_within_the_cap():
    # An older specmon recorded the baseline of probes that did not agree ([1.0, 1.0, 3.34,
    # 3.02, 3.18]: expected 2.31, tolerance 3.60): replayed, a probe at AL 1.0 on a degraded
    # engine is more than 30% below the expected AL and never "ok".
    tracker = CanaryTracker()
    statuses = []
    for i in range(3):
        tracker.apply(
            CanaryProbed(
                t=float(i),
                source="http://h",
                acceptance_length=1.0,
                expected_al=2.308,
                tolerance=3.598,
                learned_probes=5,
            )
        )
        statuses.append(tracker.views()[0].status)
    assert statuses == ["drifting", "drifted", "drifted"]
    assert tracker.views()[0].tolerance == pytest.approx(0.25 * 2.308)
