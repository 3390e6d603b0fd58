"""The typed read model: rows carry each acceptance source and the chosen one (server first, then
chunks, then /metrics), the server's per-request object is validated, servers have window and
since-start numbers apart, and `snapshot()` is the one converter's output of the view."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from tests.support.session_feed import LAB, SRC, Server, request_events

from specmon.core import families
from specmon.core.events import MetricSample, MetricsScraped, RequestEnded, SessionInfo
from specmon.core.server_state import lifetime_numbers
from specmon.core.session_state import SessionState
from specmon.core.stream_stats import validate_server_spec
from specmon.core.views import Acceptance, SessionView, choose_acceptance
from specmon.core.watch_json import snapshot_of

# The object vLLM 0.32.0 (cpu) returned for a 40-token answer on the noised draft, K=4
# (reference/vllm-observability.md §3.3).
DETAILED = {
    "mean_acceptance_length": 2.6,
    "draft_acceptance_rate": 0.4,
    "acceptance_histogram": [5, 2, 4, 2, 2],
    "num_spec_steps": 15,
    "num_accepted_draft_tokens": 24,
    "num_draft_tokens": 60,
    "num_spec_tokens": 4,
    "per_step_accepted": [2, 4, 0, 4, 2, 2, 0, 3, 1, 2, 0, 3, 0, 0, 1],
    "per_step_drafted": [4] * 15,
}
PER_POS = (10 / 15, 8 / 15, 4 / 15, 2 / 15)


def _with_spec(events: list, spec: object) -> list:
    end = events[-1]
    assert isinstance(end, RequestEnded)
    return [*events[:-1], dataclasses.replace(end, spec_decoding=spec)]


def _state() -> SessionState:
    return SessionState(SessionInfo(server=SRC, n_spec=4))


# ------------------------------------------------------------------ the server's own object


def test_detailed_object_gives_al_rate_and_per_position_from_the_steps() -> None:
    spec, note = validate_server_spec(DETAILED)
    assert note is None and spec is not None
    assert spec.mean_acceptance_length == pytest.approx(2.6)
    assert spec.draft_acceptance_rate == pytest.approx(0.4)
    assert spec.per_position_rates == pytest.approx(PER_POS)
    assert spec.per_step_accepted == tuple(DETAILED["per_step_accepted"])


def test_summary_object_gives_the_same_per_position_from_the_histogram() -> None:
    summary = {k: v for k, v in DETAILED.items() if not k.startswith("per_step")}
    spec, note = validate_server_spec(summary)
    assert note is None and spec is not None
    assert spec.per_position_rates == pytest.approx(PER_POS)
    assert spec.per_step_accepted is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"per_step_accepted": [2, 4, 0]}, "entries for 15 steps"),
        ({"per_step_drafted": [4] * 14}, "entries for 15 steps"),
        ({"num_accepted_draft_tokens": 61}, "above drafted"),
        ({"num_draft_tokens": -60}, "whole number"),
        ({"num_spec_steps": 10**12}, "absurdly large"),
        ({"per_step_accepted": [5] + [2] * 14}, "0..4"),
        ({"per_step_accepted": [1] * 15}, "does not sum"),
        ({"acceptance_histogram": [5, 2, 4, 2, 1]}, "does not sum"),
        ({"acceptance_histogram": "many"}, "not a list"),
        ({"num_spec_steps": True}, "whole number"),
        ({"per_step_accepted": list(range(2_000_000))}, "absurdly many"),
    ],
)
def test_a_bad_object_is_ignored_with_a_note(change: dict, why: str) -> None:
    spec, note = validate_server_spec({**DETAILED, **change})
    assert spec is None
    assert note is not None and why in note


def test_not_an_object_is_ignored_with_a_note_and_absent_is_silent() -> None:
    assert validate_server_spec(None) == (None, None)
    spec, note = validate_server_spec([1, 2])
    assert spec is None and note is not None and "not an object" in note


def test_row_prefers_the_server_object_and_keeps_every_source() -> None:
    state = _state()
    for e in _with_spec(
        request_events("r1", 0.0, tokens_per_step=5, steps=15, step_s=0.01), DETAILED
    ):
        state.apply(e)
    row = state.view().rows[-1]
    assert row.acceptance is not None and row.acceptance.source == "server"
    assert row.acceptance.acceptance_length == pytest.approx(2.6)
    assert row.acceptance.per_position_rates == pytest.approx(PER_POS)
    assert row.acceptance_chunks is not None
    assert row.acceptance_chunks.acceptance_length == pytest.approx(5.0)
    assert row.acceptance_chunks.per_position_rates == (1.0, 1.0, 1.0, 1.0)
    assert row.spec_steps is not None
    assert list(row.spec_steps.accepted) == DETAILED["per_step_accepted"]
    assert row.spec_steps.total == 15
    assert row.spec_decoding_note is None
    snap = state.snapshot()["requests"]["rows"][-1]
    assert snap["acceptance_source"] == "server"
    assert snap["server_acceptance_length"] == pytest.approx(2.6)
    assert snap["client_acceptance_length"] == pytest.approx(5.0)
    assert snap["server_per_step_accepted"] == DETAILED["per_step_accepted"]


def test_a_bad_object_falls_back_to_chunks_with_a_note_on_the_row() -> None:
    state = _state()
    bad = {**DETAILED, "num_accepted_draft_tokens": 100}
    for e in _with_spec(request_events("r1", 0.0, tokens_per_step=5, steps=15, step_s=0.01), bad):
        state.apply(e)
    row = state.view().rows[-1]
    assert row.acceptance_server is None
    assert row.acceptance is not None and row.acceptance.source == "chunks"
    assert row.spec_decoding_note is not None and "above drafted" in row.spec_decoding_note
    assert state.snapshot()["requests"]["rows"][-1]["server_spec_note"] == row.spec_decoding_note


def test_the_vanilla_judge_reads_the_server_al_before_the_chunks() -> None:
    # Chunks say 5 tokens a step, but the server says nothing was accepted: flagged.
    nothing = {
        "num_spec_steps": 15,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 60,
        "num_spec_tokens": 4,
        "acceptance_histogram": [15, 0, 0, 0, 0],
    }
    state = _state()
    events = request_events("r1", 0.0, tokens_per_step=5, steps=15, step_s=0.01)
    for e in _with_spec(events, nothing):
        state.apply(e)
    row = state.view().rows[-1]
    assert row.vanilla is not None and "acceptance_near_zero" in row.vanilla.codes


def test_metrics_source_is_used_when_neither_server_nor_chunks_has_one() -> None:
    server = Acceptance("server", None)
    metrics = Acceptance("metrics", 3.0, 0.5, (0.8, 0.6))
    assert choose_acceptance(server, None, metrics) is metrics
    chunks = Acceptance("chunks", 4.0)
    assert choose_acceptance(None, chunks, metrics) is chunks
    assert choose_acceptance(Acceptance("server", 2.0), chunks, metrics) == Acceptance(
        "server", 2.0
    )
    assert choose_acceptance(None, None, None) is None


def test_a_request_alone_gets_its_metrics_acceptance_in_the_view() -> None:
    server = Server(k=4)
    state = _state()
    state.apply(server.scrape(0.0))
    for e in request_events("r1", 0.1, tokens_per_step=3, steps=10, step_s=0.01, server=server):
        state.apply(e)
    state.apply(server.scrape(1.0))
    row = state.view().rows[-1]
    assert row.acceptance_metrics is not None
    assert row.acceptance_metrics.acceptance_length == pytest.approx(3.0)
    assert row.acceptance is not None and row.acceptance.source == "chunks"
    # 3 tokens a step at K = 4: two drafts accepted in every step
    assert row.acceptance.per_position_rates == (1.0, 1.0, 0.0, 0.0)
    assert row.acceptance.draft_acceptance_rate == pytest.approx(0.5)
    # the same request's /metrics numbers agree with its chunks
    assert row.acceptance_metrics.per_position_rates == pytest.approx((1.0, 1.0, 0.0, 0.0))


# ------------------------------------------------------------------ since-start numbers


def test_lifetime_numbers_come_from_absolute_values_on_the_first_scrape() -> None:
    server = Server(k=4)
    for _ in range(10):
        server.step(2)  # served before the watch started
    state = _state()
    state.apply(server.scrape(5.0))
    view = state.view().servers[0]
    assert view.window.acceptance_length is None  # one scrape: no window yet
    assert view.lifetime is not None
    assert view.lifetime.acceptance_length == pytest.approx(3.0)
    assert view.lifetime.draft_acceptance_rate == pytest.approx(0.5)
    assert view.lifetime.per_position_rates == pytest.approx((1.0, 1.0, 0.0, 0.0))
    assert view.lifetime.drafts == 10 and view.lifetime.generation_tokens == 30
    assert view.lifetime.since_reset_t is None
    life = state.snapshot()["servers"][SRC]["lifetime"]
    assert life["acceptance_length"] == pytest.approx(3.0)


def test_lifetime_after_a_reset_says_since_when() -> None:
    server = Server(k=4)
    for _ in range(10):
        server.step(3)
    state = _state()
    state.apply(server.scrape(1.0))
    fresh = Server(k=4)  # the server restarted: counters from 0
    fresh.step(1)
    state.apply(fresh.scrape(2.0))
    life = state.view().servers[0].lifetime
    assert life is not None and life.since_reset_t == 2.0
    assert life.acceptance_length == pytest.approx(2.0)


def _page(**values: float) -> list[MetricSample]:
    names = {
        "gen": families.GENERATION_TOKENS,
        "drafts": families.SPEC_DRAFTS,
        "draft_tokens": families.SPEC_DRAFT_TOKENS,
        "accepted": families.SPEC_ACCEPTED,
    }
    out = [MetricSample(names[k], LAB, v) for k, v in values.items() if k in names]
    if "pos0" in values:
        out.append(
            MetricSample(families.SPEC_ACCEPTED_PER_POS, (*LAB, ("position", "0")), values["pos0"])
        )
    return out


@pytest.mark.parametrize(
    "values",
    [
        {"gen": 100.0, "drafts": 10.0, "draft_tokens": 40.0, "accepted": -5.0},
        {"gen": 100.0, "drafts": 10.0, "draft_tokens": 40.0, "accepted": math.nan},
        {"gen": 100.0, "drafts": 10.0, "draft_tokens": 40.0, "accepted": 50.0},
        {"gen": 100.0, "drafts": math.inf, "draft_tokens": 40.0, "accepted": 20.0},
    ],
)
def test_garbage_absolute_values_give_no_lifetime_acceptance(values: dict) -> None:
    life = lifetime_numbers(_page(**values), None)
    assert life.acceptance_length is None
    assert life.draft_acceptance_rate is None
    assert life.note is not None


def test_a_position_above_the_drafts_gives_no_lifetime_ratios() -> None:
    life = lifetime_numbers(
        _page(gen=100.0, drafts=10.0, draft_tokens=40.0, accepted=20.0, pos0=11.0), None
    )
    assert life.acceptance_length is None and life.per_position_rates is None
    assert life.generation_tokens == 100.0  # the sound family is still shown


def test_garbage_page_never_reaches_json_as_nan() -> None:
    state = _state()
    bad = _page(gen=math.nan, drafts=10.0, draft_tokens=40.0, accepted=20.0)
    state.apply(MetricsScraped(t=1.0, source=SRC, samples=tuple(bad)))
    text = json.dumps(state.snapshot(), allow_nan=False)
    assert '"lifetime"' in text


# ------------------------------------------------------------------ the view and its JSON


def test_snapshot_is_the_json_of_the_view_and_views_are_frozen() -> None:
    server = Server(k=4)
    state = _state()
    state.apply(server.scrape(0.0))
    for e in request_events("r1", 0.1, tokens_per_step=3, steps=10, step_s=0.01, server=server):
        state.apply(e)
    state.apply(server.scrape(1.0))
    view = state.view()
    assert isinstance(view, SessionView)
    assert state.snapshot() == snapshot_of(view)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.rows[0].decode_tok_s = 1.0  # type: ignore[misc]
    json.dumps(state.snapshot(), allow_nan=False)


def test_a_finished_row_object_is_reused_between_views() -> None:
    state = _state()
    for e in request_events("r1", 0.0, tokens_per_step=3, steps=10, step_s=0.01):
        state.apply(e)
    assert state.view().rows[0] is state.view().rows[0]  # built once, not per read
