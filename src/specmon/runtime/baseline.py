"""The session state a live session or a replay folds into, with the vanilla baseline its
vanilla-speed flag compares against: the one given (`--baseline`), else (a replay) the one the
recording was judged against, else the stored one."""

from __future__ import annotations

import sys
from collections.abc import Callable

from specmon.core.events import SessionInfo
from specmon.core.recording_format import RecordedBaseline
from specmon.core.session_state import SessionState
from specmon.sources.baseline_store import BaselineKey, BaselineStore, BaselineStoreError

Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def choose_baseline(
    given: float | None,
    info: SessionInfo,
    *,
    recorded: RecordedBaseline | None = None,
    store: BaselineStore | None = None,
    warn: Warn = _stderr,
) -> tuple[float | None, str | None]:
    """The vanilla baseline in effect and where it came from: `given` ("given"), else the
    recording's (`recorded`: "recording"), else the stored one for the session's model, GPU and
    vLLM version ("stored"); (None, None) when there is none. A simulated server never gets a
    stored (real) baseline. An unreadable store is reported through `warn`."""
    if given is not None:
        return given, "given"
    if recorded is not None:
        return recorded.tok_s, "recording"
    if info.simulated or not info.model:
        return None, None
    key = BaselineKey(info.model, info.gpu or "", info.vllm_version or "")
    try:
        found = (store or BaselineStore()).get(key)
    except BaselineStoreError as exc:
        warn(f"specmon: no stored vanilla baseline used: {exc}")
        return None, None
    return (found.tok_s, "stored") if found is not None else (None, None)


def recorded_baseline(
    given: float | None,
    info: SessionInfo,
    *,
    store: BaselineStore | None = None,
    warn: Warn = _stderr,
) -> RecordedBaseline | None:
    """The baseline a recording of this session carries in its header: the one in effect
    (`choose_baseline`), None when there is none (docs/recording-format.md)."""
    tok_s, source = choose_baseline(given, info, store=store, warn=warn)
    return None if tok_s is None else RecordedBaseline(tok_s, source)


def state_factory(
    baseline: float | None,
    *,
    recorded: RecordedBaseline | None = None,
    store: BaselineStore | None = None,
    warn: Warn = _stderr,
) -> Callable[[SessionInfo], SessionState]:
    """A SessionState factory using `baseline`, else the recording's (`recorded`), else the
    stored baseline for the session's model, GPU and vLLM version (`choose_baseline`). An
    unreadable store is reported through `warn` and the session runs without a baseline."""

    def make(info: SessionInfo) -> SessionState:
        tok_s, source = choose_baseline(baseline, info, recorded=recorded, store=store, warn=warn)
        return SessionState(info, baseline_tok_s=tok_s, baseline_from=source)

    return make
