"""The session state a live session or a replay folds into, with the vanilla baseline its
vanilla-speed flag compares against: the one given (`--baseline`), else the stored one."""

from __future__ import annotations

import sys
from collections.abc import Callable

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.sources.baseline_store import BaselineKey, BaselineStore, BaselineStoreError


def state_factory(
    baseline: float | None,
    *,
    store: BaselineStore | None = None,
    warn: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
) -> Callable[[SessionInfo], SessionState]:
    """A SessionState factory using `baseline`, else the stored baseline for the session's model,
    GPU and vLLM version. A simulated server never gets a stored (real) baseline. An unreadable
    store is reported through `warn` and the session runs without a baseline."""

    def make(info: SessionInfo) -> SessionState:
        tok_s = baseline
        if tok_s is None and not info.simulated and info.model:
            key = BaselineKey(info.model, info.gpu or "", info.vllm_version or "")
            try:
                found = (store or BaselineStore()).get(key)
            except BaselineStoreError as exc:
                warn(f"specmon: no stored vanilla baseline used: {exc}")
                found = None
            tok_s = found.tok_s if found is not None else None
        return SessionState(info, baseline_tok_s=tok_s)

    return make
