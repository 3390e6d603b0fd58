"""`specmon replay FILE`'s run, once its command line is read (cli/replay_cmd.py): the recording
through the recording player into a fresh session state, shown as the final snapshot's JSON, the
replay screen (its port: `replay_port`), or the plain lines; and the notices of what the reader
skipped or where it stopped (docs/replay.md)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmon.runtime.one_line import fail

if TYPE_CHECKING:
    from specmon.core.clock import Clock
    from specmon.core.events import SessionInfo
    from specmon.core.session_state import SessionState
    from specmon.sources.recording_player import ReadProblem, RecordingPlayer, RecordingReader
    from specmon.ui.replay_port import ReplayPort

NAME = "replay"


def recorded_label(
    info: SessionInfo,
    started_at: str | None,
    *,
    baseline_tok_s: float | None = None,
    baseline_from: str | None = None,
) -> str:
    """What a replay's header says: RECORDED, the date, server, model, draft and n_spec, and
    SIMULATED for a simulated session; then the vanilla baseline in use and where it came from
    (given, recording, stored); unknown parts left out. Untrusted text is cleaned."""
    from specmon.ui.formatting import clean

    parts = ["RECORDED"]
    if info.simulated:
        parts.append("SIMULATED")
    if started_at:
        parts.append(started_at)
    if info.server:
        parts.append(info.server)
    if info.model:
        parts.append(f"model {info.model}")
    if info.draft_model:
        parts.append(f"draft {info.draft_model}")
    elif info.method:
        parts.append(f"method {info.method}")
    if info.n_spec is not None:
        parts.append(f"n_spec {info.n_spec}")
    if baseline_tok_s is not None:
        parts.append(f"vanilla {baseline_tok_s:g} tok/s ({baseline_from or 'given'})")
    return clean(" · ".join(parts))


SKIPPED_SHOWN = 5
"""How many skipped lines a notice names (the rest are counted)."""


def _notice(path: str, problem: ReadProblem, emitted: int) -> str:
    """One stderr line for a line that was skipped or a tear the replay stopped at."""
    if problem.line > 0:
        return (
            f"specmon replay: notice: {path}: line {problem.line}: {problem.message} "
            f"(replayed {emitted} events)"
        )
    return f"specmon replay: notice: {path}: {problem.message} (replayed {emitted} events)"


def notices(path: str, problems: list[ReadProblem], emitted: int) -> list[str]:
    """The stderr lines for what the reader found: every skipped line in ONE notice (how many,
    the first SKIPPED_SHOWN line numbers and the first reason), then one line for each other
    problem (where the reading stopped, damaged gzip data)."""
    skipped = [p for p in problems if p.line > 0 and p.message.startswith("skipped: ")]
    out: list[str] = []
    if len(skipped) == 1:
        out.append(_notice(path, skipped[0], emitted))
    elif skipped:
        numbers = ", ".join(str(p.line) for p in skipped[:SKIPPED_SHOWN])
        more = ", …" if len(skipped) > SKIPPED_SHOWN else ""
        first = skipped[0].message.removeprefix("skipped: ")
        out.append(
            f"specmon replay: notice: {path}: {len(skipped)} bad lines skipped "
            f"(lines {numbers}{more}; line {skipped[0].line}: {first}) "
            f"(replayed {emitted} events)"
        )
    out.extend(_notice(path, p, emitted) for p in problems if p not in skipped)
    return out


def _reader(path: str, problems: list[ReadProblem]) -> RecordingReader:
    """The recording opened (its header read); RecordingError (one line) when unusable."""
    from specmon.core.errors import RecordingError
    from specmon.sources.recording_player import RecordingReader

    try:
        return RecordingReader(path, problems)
    except RecordingError:
        damaged = "; ".join(p.message for p in problems)
        if damaged:  # the gzip stream broke before a whole header line came out of it
            raise RecordingError(f"{path}: not a readable gzip recording ({damaged})") from None
        raise


def _started_at(header: dict[str, Any]) -> str | None:
    started = header.get("started_at")
    return started if isinstance(started, str) else None


def _open(path: str, speed: float | None) -> tuple[RecordingPlayer, str | None]:
    """The player and the header's `started_at`; RecordingError (one line) when unusable."""
    from specmon.sources.recording_player import RecordingPlayer

    reader = _reader(path, [])
    reader.close()
    return RecordingPlayer(path, speed=speed), _started_at(reader.header)


def run_replay(
    path: str, *, json: bool, speed: float, baseline: float | None, theme: str | None
) -> int:
    """`specmon replay FILE`: the final snapshot as JSON (`json`), the replay screen on a
    terminal (or a browser), else the plain lines; the exit status."""
    from specmon.core.errors import RecordingError
    from specmon.runtime.baseline import state_factory

    try:
        player, started_at = _open(path, None if json else speed)
    except RecordingError as exc:
        return fail(NAME, str(exc))
    state = state_factory(baseline, recorded=player.baseline)(player.info)
    from specmon.runtime.terminal import wants_app  # a terminal, or a browser (specmon web)

    label = recorded_label(
        player.info,
        started_at,
        baseline_tok_s=state.baseline_tok_s,
        baseline_from=state.baseline_from,
    )
    if not json and wants_app():
        player.close()
        return _app(path, state.baseline_tok_s, speed, label, theme, state.baseline_from)
    try:
        status = _json_snapshot(player, state) if json else _live(player, state, label, path)
    except KeyboardInterrupt:
        player.close()
        status = 130
    for line in notices(path, player.problems, player.emitted):
        print(line, file=sys.stderr)
    return status


def _json_snapshot(player: RecordingPlayer, state: SessionState) -> int:
    import asyncio
    import json

    from specmon.core.numbers import finite_json
    from specmon.core.watch_json import snapshot_of

    asyncio.run(player.run(state.apply))
    print(json.dumps(finite_json(snapshot_of(state.view())), allow_nan=False))
    return 0


def _live(player: RecordingPlayer, state: SessionState, label: str, path: str) -> int:
    from specmon.runtime.hub import Hub
    from specmon.ui.live_console import run_plain

    done = threading.Event()
    with Hub(name="specmon-replay") as hub:
        hub.subscribe(state.apply)
        future = hub.run_source(player.run)
        future.add_done_callback(lambda _f: done.set())
        read_view: Callable[[], Any] = lambda: hub.read(state.view)  # noqa: E731
        print(f"[{label}] {Path(path).name}", flush=True)
        run_plain(read_view, done=done, write=lambda s: print(s, flush=True))
        if future.done() and not future.cancelled() and future.exception() is not None:
            return fail(NAME, f"the replay failed: {future.exception()}", 1)
    return 0


def replay_port(
    path: str,
    *,
    baseline_tok_s: float | None,
    speed: float,
    label: str,
    clock: Clock | None = None,
    baseline_from: str | None = None,
) -> ReplayPort:
    """Open the recording and make the replay screen's port: the replay session (at `speed`,
    clamped to x0.5..x64, on `clock`), which folds the recording once as it streams by (the
    events are not kept: a seek reads the file again from a kept mark), and the notices of what
    the reader skipped or where the recording was torn. Raises RecordingError (one line) for an
    unusable file. The port keeps the file open until `close()`."""
    from specmon.core.clock import monotonic_clock
    from specmon.core.session_state import SessionState
    from specmon.runtime.replay_session import ReplaySession, clamp_speed
    from specmon.ui.replay_port import ReplayPort

    problems: list[ReadProblem] = []
    reader = _reader(path, problems)
    info = reader.info
    try:
        session = ReplaySession(
            info,
            reader,
            lambda: SessionState(info, baseline_tok_s=baseline_tok_s, baseline_from=baseline_from),
            clock=clock or monotonic_clock,
            speed=clamp_speed(speed),
        )
    except BaseException:
        reader.close()
        raise
    said = tuple(
        line.removeprefix("specmon replay: ")
        for line in notices(path, problems, session.events_total)
    )
    return ReplayPort(session, label=label, notices=said)


def _app(
    path: str,
    baseline_tok_s: float | None,
    speed: float,
    label: str,
    theme: str | None,
    baseline_from: str | None = None,
) -> int:
    """On a terminal: the Textual replay screen (ui/screens/replay.py). The whole recording
    is folded once here, before the app starts (streamed: memory does not grow with its size);
    a torn or skipped line is named on the screen and, after the app, on stderr."""
    from specmon.core.errors import RecordingError
    from specmon.ui.app import SpecmonApp
    from specmon.ui.app_runner import run_textual

    try:
        port = replay_port(
            path,
            baseline_tok_s=baseline_tok_s,
            speed=speed,
            label=label,
            baseline_from=baseline_from,
        )
    except RecordingError as exc:
        return fail(NAME, str(exc))
    try:  # nothing runs behind the app: no session to stop; Ctrl-C raises KeyboardInterrupt
        return run_textual(SpecmonApp(port, mode="replay", theme=theme))
    finally:  # after the app, on the shell's screen
        port.close()
        for notice in port.notices:
            print(f"specmon replay: {notice}", file=sys.stderr)
