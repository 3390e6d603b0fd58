"""Verdicts in mixed conditions: a degradation cycle, loops and garbled answers in one session, as
the README's drift demo serves them (the seeds' cycle of 10: 5 fast, 1 transition, 3 degraded,
1 recovery; a loop every 5th answer, symbol soup every 7th). Quality is judged before speed, the
speed levels and the cycle are robust to the loops, and every count agrees."""

from __future__ import annotations

from collections import Counter

from tests.support.diagnosis_feed import SRC, answer

from specmon.core.events import Event, RequestEnded, SessionInfo, StreamChunk
from specmon.core.session_state import SessionState
from specmon.core.verdict import request_verdict
from specmon.core.views import SessionView
from specmon.runtime.replay_session import ReplaySession

K = 8
STEP_S = 0.02
CYCLE = "fffffTdddf"
"""The seeds' cycle by position: fast, Transition, degraded."""
SOUP = ["##", "@!", "}{", "<>", "%%", "&&"]


def _state() -> SessionState:
    return SessionState(SessionInfo(server="sim", model="tiny", n_spec=K))


def _answer(i: int, t0: float, state: str, *, loop_every: int, garble_every: int) -> list[Event]:
    """Answer r{i} (1-based) in `state` ("f", "T", "d"), unless it is a loop or garbled."""
    rid = f"r{i}"
    words = [f"w{i}_{j}" for j in range(900)]
    if loop_every and i % loop_every == 0:  # every draft accepted, one phrase repeated
        steps, text = [K + 1] * 28, ["the", "cat", "sat", "on", "a", "mat"]
    elif garble_every and i % garble_every == 0:  # no draft accepted, symbol soup
        steps, text = [1] * 250, SOUP
    elif state == "f":
        steps, text = [3, 4, 3, 4, 3] * 15, words  # AL 3.4
    elif state == "T":
        steps, text = [2, 2, 2, 1, 2] * 27, words  # AL 1.8
    else:
        steps, text = [1] * 250, words  # AL 1.0, normal text: vanilla speed, not garbled
    return answer(rid, t0, prompt_tokens=100, step_tokens=steps, step_s=STEP_S, words=text)


def _events(n: int, *, cycle: bool, loop_every: int = 5, garble_every: int = 7) -> list[Event]:
    events: list[Event] = []
    t = 0.0
    for i in range(1, n + 1):
        state = CYCLE[(i - 1) % len(CYCLE)] if cycle else "f"
        new = _answer(i, t, state, loop_every=loop_every, garble_every=garble_every)
        events += new
        t = new[-1].t + 0.5
    return events


def _fold(events: list[Event]) -> SessionView:
    state = _state()
    for e in events:
        state.apply(e)
    return state.view()


def _kinds(view: SessionView) -> dict[str, str]:
    return {r.request_id: request_verdict(r).kind for r in view.rows}


def test_with_the_cycle_and_loops_the_cycle_is_the_seeds_and_healthy_answers_are_ok() -> None:
    # Before: the loops (AL 9, ~450 tok/s) were the fast level and the cycle "every 5 requests",
    # healthy answers badged vanilla-speed or transition and the loop itself "ok".
    view = _fold(_events(40, cycle=True, garble_every=0))
    cycle = view.cycle
    assert cycle is not None and cycle.detected
    assert cycle.period == 10 and cycle.degraded_per_cycle == 3
    assert cycle.fast_mean_tok_s is not None and cycle.fast_mean_tok_s < 200  # not the loops'
    kinds = _kinds(view)
    assert {kinds[f"r{i}"] for i in range(5, 41, 5)} == {"loop"}
    for i in range(1, 41):
        state = CYCLE[(i - 1) % 10]
        if i % 5 == 0:
            continue
        want = {"f": "ok", "T": "transition", "d": "vanilla-speed"}[state]
        assert kinds[f"r{i}"] == want, (i, kinds[f"r{i}"])


def test_without_a_cycle_loops_and_garbles_make_no_cycle_and_are_flagged_as_such() -> None:
    # Before: a cycle of period 5 with 4 degraded per cycle, the thermal attribution's fast
    # answers were the loops (AL 9), and no garbled answer (r7, r14, r21) was flagged.
    view = _fold(_events(25, cycle=False))
    assert view.cycle is not None and not view.cycle.detected
    d = view.diagnosis
    assert d is not None
    assert d.quality.garbled == 3 and d.quality.loops == 5
    assert [v.request_id for v in d.quality.flagged if v.flag == "garbled"] == ["r7", "r14", "r21"]
    assert d.thermal.ref_acceptance_length is not None and d.thermal.ref_acceptance_length < 4
    kinds = _kinds(view)
    assert Counter(kinds.values()) == {"ok": 17, "loop": 5, "garbled": 3}


def test_with_the_cycle_garbled_answers_are_flagged() -> None:
    # Before: the cycle's AL 1.0 answers widened the spread of the usual AL: never garbled.
    view = _fold(_events(40, cycle=True, loop_every=0))
    d = view.diagnosis
    assert d is not None
    garbled = [v.request_id for v in d.quality.flagged if v.flag == "garbled"]
    assert garbled == ["r7", "r14", "r21", "r28", "r35"]
    kinds = _kinds(view)
    assert all(kinds[r] == "garbled" for r in garbled)
    assert view.cycle is not None and view.cycle.detected and view.cycle.period == 10


def test_every_count_agrees_and_twins_get_the_same_badge() -> None:
    # Before: r6 (the first transition) was vanilla-speed, decided before the slow level
    # existed, while its twins r16 and r26 were transitions; the panel counted 10 and 2, the
    # timeline 9 flags and the JSON's summary 9.
    events = _events(30, cycle=True, loop_every=0, garble_every=0)
    info = SessionInfo(server="sim", model="tiny", n_spec=K)
    session = ReplaySession(info, events, lambda: SessionState(info), playing=False)
    view = session.final_view
    kinds = _kinds(view)
    assert kinds["r6"] == kinds["r16"] == kinds["r26"] == "transition"
    flagged_ends = sorted(r.t_end for r in view.rows if request_verdict(r).flagged)
    assert list(session.timeline.flags) == flagged_ends
    assert len(session.timeline.flags) == 12 == session.timeline.count("flag")
    assert view.summary.flagged == 12
    by_kind = Counter(kinds.values())
    assert by_kind == {"ok": 18, "transition": 3, "vanilla-speed": 9}
    s = view.summary
    assert (s.vanilla_speed, s.transition) == (9, 3)
    assert all(r.settled for r in view.rows)


def test_a_row_waiting_for_levels_is_judged_again_when_they_appear() -> None:
    state = _state()
    events = _events(10, cycle=True, loop_every=0, garble_every=0)
    ends = [e for e in events if isinstance(e, RequestEnded)]
    for e in events:
        state.apply(e)
        if e is ends[5]:  # r6 ended: one slow answer is no level yet
            row = state.view().rows[-1]
            assert row.request_id == "r6" and not row.settled
            assert request_verdict(row).kind == "ok"
    rows = {r.request_id: r for r in state.view().rows}
    assert rows["r6"].settled and request_verdict(rows["r6"]).kind == "transition"
    assert state.view().summary.transition == 1


def test_an_answer_recorded_in_part_is_judged_on_its_recorded_part() -> None:
    # A recording begun in the middle of an answer: no start, the first chunk already at 180
    # tokens, then 76 more over 1.2 s. Before: 255 tokens over 1.2 s (212 tok/s).
    state = _state()
    t = 10.0
    state.apply(StreamChunk(t=t, request_id="r9", text="a ", completion_tokens=180))
    cum = 180
    for _ in range(38):
        t += 1.2 / 38
        cum += 2
        state.apply(StreamChunk(t=t, request_id="r9", text="b c ", completion_tokens=cum))
    state.apply(
        RequestEnded(t=t, request_id="r9", outcome="ok", prompt_tokens=20, completion_tokens=cum)
    )
    row = state.view().rows[-1]
    assert row.decode_tok_s is not None and abs(row.decode_tok_s - 76 / 1.2) < 1.0
    assert row.partial
    assert state.snapshot()["requests"]["rows"][-1]["partial"] is True


def test_the_exporter_counts_the_verdicts_the_screens_count() -> None:
    # Before: the exporter counted the vanilla verdict of each row when first seen (9 here), not
    # the badges (9 vanilla-speed and 3 transitions), and it never counted a transition.
    from specmon.runtime.exporter import Exporter

    state = _state()
    exporter = Exporter()
    for e in _events(30, cycle=True, loop_every=0, garble_every=0):
        state.apply(e)
        if isinstance(e, RequestEnded):
            exporter.update(state.view())  # as `follow` does, a view after every answer
    summary = state.view().summary

    def counted(name: str, **labels: str) -> float:
        value = exporter.registry.get_sample_value(name, {"server": SRC, **labels})
        return value or 0.0

    transitions = counted("specmon_flagged_requests_total", verdict="transition")
    vanilla = counted("specmon_flagged_requests_total", verdict="vanilla-speed")
    assert (vanilla, transitions) == (summary.vanilla_speed, summary.transition) == (9, 3)
    assert counted("specmon_vanilla_speed_requests_total", reason="slow_level") == 0  # AL 1.0
    assert counted("specmon_vanilla_speed_requests_total", reason="acceptance_near_zero") == 9


def test_bench_judges_quality_before_speed_in_its_cycle() -> None:
    # `specmon bench` over the same answers: the loops are flagged and the cycle is the seeds'
    # (before: a period of 5, the loops' speed its fast level, and no loop said).
    from specmon.bench.analysis import analyze
    from specmon.bench.config import BenchConfig
    from specmon.bench.result import ServerInfo

    result = analyze(
        _events(40, cycle=True, garble_every=0),
        server=ServerInfo(url=SRC, n_spec=K),
        config=BenchConfig(),
    )
    assert result.cycle is not None and result.cycle.period == 10
    assert result.cycle.degraded_per_cycle == 3
    assert result.summary.loop_requests == 8
    assert [r.request_id for r in result.requests if r.quality == "loop"] == [
        f"r{i}" for i in range(5, 41, 5)
    ]


def test_a_gpu_that_throttles_mid_cycle_moves_no_badge() -> None:
    # The seeds' cycle while the GPU throttles from 1725 to 1365 MHz after answer 15 (every step
    # a fifth slower, as the simulator's thermal drift makes it). Before: the cool and the hot
    # GPU's fast answers made one wide fast level and its degraded ones one wide slow level, so
    # fast answers on the hot GPU were badged transition and its transitions vanilla-speed.
    from tests.support.diagnosis_feed import gpu

    events: list[Event] = []
    t = 0.0
    for i in range(1, 41):
        clock = 1725.0 if i <= 15 else 1365.0
        state = CYCLE[(i - 1) % len(CYCLE)]
        steps = {"f": [3, 4, 3, 4, 3] * 15, "T": [2, 2, 2, 1, 2] * 27, "d": [1] * 250}[state]
        new = answer(
            f"r{i}",
            t,
            prompt_tokens=100,
            step_tokens=steps,
            step_s=STEP_S * 1725.0 / clock,
            words=[f"w{i}_{j}" for j in range(900)],
        )
        end = new[-1].t
        k = 0
        while t + 0.1 * k < end:  # a GPU sample every 0.1 s while it runs
            new.append(gpu(t + 0.1 * k, clock))
            k += 1
        events += sorted(new, key=lambda e: e.t)
        t = end + 0.5
    view = _fold(events)
    kinds = _kinds(view)
    for i in range(1, 41):
        want = {"f": "ok", "T": "transition", "d": "vanilla-speed"}[CYCLE[(i - 1) % 10]]
        assert kinds[f"r{i}"] == want, (i, kinds[f"r{i}"])
    row = next(r for r in view.rows if r.request_id == "r36")  # a throttled transition
    assert row.speed_class is not None and row.speed_class.fast_level_tok_s is not None
    assert row.speed_class.fast_level_tok_s < 150  # the fast level at its own (hot) clock
    assert view.cycle is not None and view.cycle.detected and view.cycle.period == 10
