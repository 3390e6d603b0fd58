"""Large files: what opening a big recording and resuming a big conversation cost (time, peak
memory), and whether saving survives other chats holding the store's write lock.

Generated in a temporary directory (removed at the end unless `--keep`):

- a recording of `--recording-mb` MB (`.ndjson`, uncompressed): the demo-cycle sample repeated
  end to end (request ids renamed, times shifted), written by specmon's own Recorder;
- a conversation of `--conversation-mb` MB in a chat store: turns of 1 MB answers, inserted with
  plain sqlite3 (as an older specmon, which had no size cap, could have written it).

Each measurement runs in its own child process; its peak RSS is the child's `ru_maxrss`
(os.wait4), its time the child's own clock around the work (imports not counted), wall and
CPU (`time.process_time`: steadier than the wall time on a shared machine):

- `replay --json`: `specmon replay FILE --json` (the streaming path), the whole command;
- replay app, open: `ui.replay_app.replay_port`, the loader the replay screen uses before the app
  starts (headless, no terminal), then the view at the start;
- replay app, seek back: from the end to the middle, then the view;
- resume: `ui.saved_chats.pick_resumed` for `--resume ID` and the turns the chat screen
  puts back (`ChatHistory.restored`), without drawing them; then the same on the chat screen
  (a headless Textual app with a fake port, tests/support/ui_fakes.py), until the turns are
  mounted and the resume line is shown.

`--contention N` runs N chat processes against one store, each saving `--answers` answers of
1 MB one after the other, while another connection holds the write lock `--hold` seconds once
(as a long write or checkpoint of another program would); it counts the chats that stopped
saving and the answers in the file at the end.

    PYTHONPATH=src python3 benchmarks/large_files.py [--recording-mb 1000] [--conversation-mb 100]
        [--contention 6] [--answers 30] [--hold 1] [--skip recording,conversation,contention]
        [--keep]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_REPLAY_APP = """
import json, sys, time
from specmon.ui.replay_app import replay_port
t0, c0 = time.perf_counter(), time.process_time()
port = replay_port(sys.argv[1], baseline_tok_s=None, speed=1.0, label="bench")
port.view()
opened, cpu = time.perf_counter() - t0, time.process_time() - c0
t0 = time.perf_counter()
end = port.timeline.end
port.seek(end)
port.view()
port.seek((port.timeline.start + end) / 2)
port.view()
back = time.perf_counter() - t0
print(json.dumps({"open_s": opened, "cpu_s": cpu, "seek_s": back,
                  "total": port.position().events_total}))
"""

_REPLAY_JSON = """
import contextlib, io, json, sys, time
from specmon.cli.main import main
t0, c0 = time.perf_counter(), time.process_time()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["replay", sys.argv[1], "--json"])
print(json.dumps({"open_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "code": code,
                  "requests": json.loads(out.getvalue())["requests"]["summary"]["total"]}))
"""

_RESUME = """
import argparse, json, sys, time
from specmon.ui.saved_chats import chat_history_for, pick_resumed
args = argparse.Namespace(resume=sys.argv[1], attach=None, model=None, preset=None, system=None,
    temperature=None, top_p=None, max_tokens=None, no_save=True, api_key=None)
t0 = time.perf_counter()
resumed = pick_resumed(args)
args.resumed = resumed
history = chat_history_for(args)
restored = history.restored()
line = getattr(history, "resumed_line", lambda: None)()
print(json.dumps({"open_s": time.perf_counter() - t0, "turns": len(restored), "line": line}))
"""


_RESUME_SCREEN = """
import argparse, asyncio, json, sys, time
from tests.support.ui_fakes import FakePort
from specmon.ui.saved_chats import chat_history_for, pick_resumed
from specmon.ui.app import SpecmonApp
from textual.pilot import Pilot

_wait = Pilot._wait_for_screen
async def _patient(self, timeout=900.0):  # mounting 100 MB of turns outlasted the 30 s default
    return await _wait(self, timeout)
Pilot._wait_for_screen = _patient
args = argparse.Namespace(resume=sys.argv[1], attach=None, model=None, preset=None, system=None,
    temperature=None, top_p=None, max_tokens=None, no_save=True, api_key=None)
t0, c0 = time.perf_counter(), time.process_time()
args.resumed = pick_resumed(args)
app = SpecmonApp(FakePort())
app.chat_history = chat_history_for(args)

async def shown() -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.screen.query(".notice"):  # the resumed line comes after the turns
            await pilot.pause(0.05)
        await pilot.pause()

asyncio.run(shown())
print(json.dumps({"open_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}))
"""


def _child(code: str, *argv: str, env: dict[str, str] | None = None) -> tuple[dict, float]:
    """Run `code` in a child Python; its JSON line and its peak RSS in MiB."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {err.decode()[-2000:]}")
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    return json.loads(lines[-1]), usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def make_recording(path: Path, megabytes: float) -> int:
    """The demo-cycle sample repeated until the file holds `megabytes` MB; the events written."""
    from specmon.core.clock import FakeClock
    from specmon.runtime.recorder import Recorder
    from specmon.sources.recording_player import read_recording

    base = read_recording(ROOT / "recordings" / "demo-cycle.ndjson.gz")
    span = max(e.t for e in base.events) + 1.0
    recorder = Recorder(path, base.info, clock=FakeClock(), flush_interval=1e9)
    target = int(megabytes * 1e6)
    written = 0
    k = 0
    try:
        while True:
            for e in base.events:
                changes: dict[str, object] = {"t": e.t + k * span}
                rid = getattr(e, "request_id", None)
                if rid is not None:
                    changes["request_id"] = f"{rid}-{k}"
                recorder.write(dataclasses.replace(e, **changes))  # type: ignore[type-var]
                written += 1
            k += 1
            recorder.flush()
            if path.stat().st_size >= target:
                return written
    finally:
        recorder.close()


def make_conversation(data_home: Path, megabytes: float) -> int:
    """A conversation of about `megabytes` MB (1 MB answers) in a store under `data_home`."""
    from specmon.core.chat_record import SavedConversation, SavedServer, SavedTurn
    from specmon.sources.conversation_store import ConversationStore

    path = data_home / "specmon" / "chats.sqlite"
    with ConversationStore(path) as store:
        cid = store.save(
            SavedConversation(
                (SavedTurn("first question", "a short answer"),),
                SavedServer("http://127.0.0.1:9000", "bench-model"),
            )
        )
    answer = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000]
    db = sqlite3.connect(path)
    with db:
        for i in range(1, max(1, int(megabytes))):
            db.execute(
                "INSERT INTO turns (conversation_id, idx, prompt, answer, status) "
                "VALUES (?, ?, ?, ?, 'ok')",
                (cid, i, f"question {i}", answer),
            )
    db.close()
    return cid


_CHAT = """
import json, sys, time
from pathlib import Path
from specmon.core.chat_record import SavedConversation, SavedServer, SavedTurn
from specmon.runtime.chat_saver import ChatSaver
from specmon.sources.conversation_store import ConversationStore
path, n, answers, go = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
saver = ChatSaver(lambda: ConversationStore(path))
answer = "x" * 1_000_000
time.sleep(max(0.0, go - time.time()))  # every chat starts at the same moment
turns = ()
for i in range(answers):
    turns = (*turns, SavedTurn(f"chat {n} question {i}", answer))
    saver.save(SavedConversation(turns, SavedServer("http://127.0.0.1:9000", "m")))
    saver.flush(timeout=120.0)
saver.close(timeout=120.0)
print(json.dumps({"problem": saver.problem}))
"""


def contention(store_path: Path, chats: int, answers: int, hold: float) -> str:
    """`chats` chat processes saving `answers` answers of 1 MB each into one store at once
    (and another program holding the write lock `hold` seconds once meanwhile); how many
    stopped saving, and how many answers the store holds at the end."""
    from specmon.sources.conversation_store import ConversationStore

    ConversationStore(store_path).close()
    go = time.time() + 1.0 + 0.3 * chats
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHAT, str(store_path), str(n), str(answers), str(go)],
            stdout=subprocess.PIPE,
        )
        for n in range(chats)
    ]
    if hold > 0:  # another program holds the write lock a while, once, as the chats save
        other = sqlite3.connect(store_path, isolation_level=None)
        time.sleep(max(0.0, go + 0.3 - time.time()))
        other.execute("BEGIN IMMEDIATE")
        time.sleep(hold)
        other.execute("COMMIT")
        other.close()
    problems = []
    for p in procs:
        out, _ = p.communicate()
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        problems.append(json.loads(lines[-1])["problem"] if lines else f"exit {p.returncode}")
    took = time.perf_counter() - t0
    stopped = [p for p in problems if p is not None]
    with ConversationStore(store_path, create=False) as store:
        saved = sum(c.turns for c in store.search(limit=1000))
    first = f" ({stopped[0]})" if stopped else ""
    return (
        f"contention: {chats} chats x {answers} answers of 1 MB, the lock held {hold:g} s once: "
        f"{len(stopped)} stopped "
        f"saving{first}, {saved} of {chats * answers} answers saved, {took:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording-mb", type=float, default=1000.0)
    parser.add_argument("--conversation-mb", type=float, default=100.0)
    parser.add_argument("--contention", type=int, default=6)
    parser.add_argument("--answers", type=int, default=30)
    parser.add_argument(
        "--hold",
        type=float,
        default=1.0,
        help="seconds another program holds the write lock once while the chats save (0: none)",
    )
    parser.add_argument(
        "--skip", default="", help="comma-separated: recording, conversation, contention"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}"
    )
    tmp = Path(tempfile.mkdtemp(prefix="specmon-large-"))
    try:
        if "recording" not in skip:
            path = tmp / "big.ndjson"
            t0 = time.perf_counter()
            events = make_recording(path, args.recording_mb)
            size = path.stat().st_size / 1e6
            print(
                f"recording: {size:,.0f} MB, {events:,} events (written in "
                f"{time.perf_counter() - t0:.0f} s)"
            )
            got, rss = _child(_REPLAY_JSON, str(path))
            print(
                f"| replay --json | {got['open_s']:.1f} s ({got['cpu_s']:.1f} s CPU) "
                f"| {rss:,.0f} MiB |"
            )
            got, rss = _child(_REPLAY_APP, str(path))
            print(
                f"| replay app: open | {got['open_s']:.1f} s ({got['cpu_s']:.1f} s CPU) "
                f"| {rss:,.0f} MiB |"
            )
            print(f"| replay app: seek end, then back to the middle | {got['seek_s']:.2f} s | |")
        if "conversation" not in skip:
            home = tmp / "data"
            cid = make_conversation(home, args.conversation_mb)
            db = home / "specmon" / "chats.sqlite"
            print(f"conversation: {db.stat().st_size / 1e6:,.0f} MB store")
            got, rss = _child(_RESUME, str(cid), env={"XDG_DATA_HOME": str(home)})
            print(
                f"| chat --resume (load, turns put back) | {got['open_s']:.2f} s | {rss:,.0f} "
                f"MiB | {got['turns']} turns | {got.get('line')}"
            )
            env = {"XDG_DATA_HOME": str(home), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
            got, rss = _child(_RESUME_SCREEN, str(cid), env=env)
            print(
                f"| chat --resume, on the chat screen (headless) | {got['open_s']:.1f} s "
                f"({got['cpu_s']:.1f} s CPU) | "
                f"{rss:,.0f} MiB |"
            )
        if "contention" not in skip:
            print(contention(tmp / "contention.sqlite", args.contention, args.answers, args.hold))
    finally:
        if args.keep:
            print(f"kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
