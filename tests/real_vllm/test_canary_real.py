"""The canary probe against a real vLLM (the tier's same-weights draft server: greedy, every draft
accepted, so the canary's AL is K+1 on every probe): it learns its baseline, then judges the next
probe ok, and it never probes the server while no other traffic runs."""

from __future__ import annotations

import asyncio

from tests.real_vllm.server import VllmServer
from tests.support.canary import canary_rounds

from specmon.core.canary import LEARN_PROBES, CanaryKey, CanaryTracker
from specmon.core.events import CanaryProbed
from specmon.sources.canary_store import CanaryStore

K = 4  # num_speculative_tokens of the tier's draft_model servers


def _key(server: VllmServer) -> CanaryKey:
    return CanaryKey(
        server=server.url, model="tiny", draft="draft_same", method="draft_model", n_spec=K
    )


def test_the_canary_learns_and_judges_a_steady_real_server(vllm_draft_same: VllmServer, tmp_path):
    store = CanaryStore(tmp_path / "canary.json")
    events = asyncio.run(
        canary_rounds(vllm_draft_same.url, store, _key(vllm_draft_same), LEARN_PROBES + 1)
    )
    probes = [e for e in events if isinstance(e, CanaryProbed)]
    assert len(probes) == LEARN_PROBES + 1
    assert all(p.outcome == "ok" for p in probes), [p.error for p in probes]
    # Same weights, greedy: every draft accepted, whichever source measured it.
    assert {p.acceptance_length for p in probes} == {K + 1.0}
    tracker = CanaryTracker()
    for p in probes:
        tracker.apply(p)
    view = tracker.views()[0]
    assert view.status == "ok" and view.expected_al == K + 1.0
    assert store.get(_key(vllm_draft_same)).learned


def test_the_canary_never_probes_an_idle_real_server(vllm_draft_same: VllmServer, tmp_path):
    store = CanaryStore(tmp_path / "canary.json")
    events = asyncio.run(
        canary_rounds(vllm_draft_same.url, store, _key(vllm_draft_same), 2, live=False)
    )
    assert events == []
    assert not (tmp_path / "canary.json").exists()
