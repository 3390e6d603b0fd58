"""A chat answer whose context overflows (HTTP 400 from the simulator, max_model_len 2048) is
resent without its oldest turns by the runtime: ONE answer, never a failed one plus an answer,
and its RequestEnded says how many turns it went without (the chat names them)."""

from __future__ import annotations

import asyncio
import json

from specmon.core.events import Event, RequestEnded, RequestStarted, SessionInfo
from specmon.core.recording_format import EventDecoder, EventEncoder
from specmon.core.session_state import SessionState
from specmon.runtime.prompt_loop import run_request
from specmon.sim.server import SimConfig, start_in_thread
from specmon.sources.stream_client import ChatRequest, StreamClient

WORDS = "word " * 700
"""About 700 tokens: three turns of two such messages overflow a 2048-token context."""


def _ask(url: str, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def go() -> None:
        async with StreamClient(url) as client:
            await run_request(client, request, events.append, request_id="chat1")

    asyncio.run(go())
    return events


def test_an_overflow_retry_is_one_answer_naming_the_turns_it_went_without():
    turns = ((f"question {i}: {WORDS}", f"answer {i}: {WORDS}") for i in range(1, 4))
    messages = tuple(
        (role, text) for q, a in turns for role, text in (("user", q), ("assistant", a))
    )
    config = SimConfig(profile="gemma4-26b-rtx5090", speed=200.0, seed=3)
    with start_in_thread(config, log_sink=lambda _l: None) as sim:
        plain = _ask(sim.url, ChatRequest("and now?", max_tokens=16, messages=messages))
        retried = _ask(
            sim.url,
            ChatRequest("and now?", max_tokens=16, messages=messages, drop_on_overflow=True),
        )
    # without the retry: one failed request (what the chat counted before)
    assert [e.outcome for e in plain if isinstance(e, RequestEnded)] == ["failed"]
    started = [e for e in retried if isinstance(e, RequestStarted)]
    ended = [e for e in retried if isinstance(e, RequestEnded)]
    assert len(started) == 1 and len(ended) == 1
    assert ended[0].outcome == "ok" and ended[0].dropped_turns == 2
    state = SessionState(SessionInfo())
    for e in retried:
        state.apply(e)
    totals = state.view().summary
    assert (totals.ok, totals.failed) == (1, 0)
    # the recording keeps it: replay names the dropped turns too
    line = json.loads(json.dumps(EventEncoder().encode(ended[0])))
    assert EventDecoder().decode(line) == ended[0]
