"""How fast the chat shows streamed text, and what it costs: specmon's chat against a bare
Textual Markdown widget re-rendered for every chunk (and, for reference, Textual's MarkdownStream),
side by side in one run, at rising simulator rates.

The simulator runs in its own process (`specmon sim`, profile gemma4-26b-h100, no schedule), paced
with `--speed` so the decode rate is about 100, 600 and 5,000 tok/s (a calibration request measures
the rate at --speed 1 first). This process runs the headless Textual app; specmon's chat opens its
session as `specmon chat --attach` does (`runtime.session.open_session`: the hub and its stream
client in a collector process of their own, events coming back in 20 ms batches), the baselines
run a Monitor (hub thread, stream client) in this process. For every chunk that carried text we
take its arrival time (the hub's clock, when the client got it) and the time the frame that
contains it was painted; lag = painted - arrived. CPU is the CPU time of this process (all
threads) and of the chat's collector process (column "collector CPU s", included in "CPU s") over
the wall time from the request's send to the last chunk painted. A mode that is still painting
20 s after the stream ended is stopped and its lag reported as a lower bound.

Mode `specmon-uncut` is specmon's chat with a line never cut inside (`blocks.RUN_CHARS` 0: the
renderer before that rule), for a before/after ratio in one run.

`--texts corpus,newline-free` runs each case with the simulator's own answers (paragraphs,
lists, code blocks) and with the same words as ONE endless paragraph: every newline of the
answer's tokens replaced by a space in the simulator process (as a tiny random model writes, seen
on a real GPU vLLM), the text that never settles at a line boundary.

Also measured: the first paint of `specmon chat` in a pseudo-terminal (120x40), from launch to
the header on screen, and to the connected header (server identified).

`--before DIR --rounds N` (DIR: a tree with an older `src/` and `benchmarks/`, e.g.
`git archive REV src benchmarks | tar -x -C DIR`): specmon's chat only, at each rate, with that
tree's code and this one's alternately (each in a child process of its own, running its own
tree's chat_render.py against a simulator of its own tree), N rounds: a before/after comparison
in one run on a loaded machine. The calibration is measured once, here, and given to both. A
tree whose chat_render gave the chat an in-process Monitor (before `open_session`) is run with
the chat's session as that tree's `specmon chat` opened it, a CollectorProcess, whose CPU is
counted as here.

Usage: python benchmarks/chat_render.py [--rates 100,600,5000] [--seconds 3] [--out FILE]
       [--modes specmon,specmon-uncut,update,stream] [--texts corpus,newline-free]
       [--before DIR --rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import fcntl
import json
import os
import platform
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from specmon.core.events import Event, RequestEnded, StreamChunk
from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Monitor, Target
from specmon.runtime.prompt_loop import run_request
from specmon.runtime.session import SessionConfig, open_session
from specmon.sources.stream_client import ChatRequest, new_request_id
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.live_port import LivePort, SessionFactory
from specmon.ui.widgets import blocks
from specmon.ui.widgets.answer import AnswerView

PROFILE = "gemma4-26b-h100"
PROMPT = "Explain speculative decoding with prose and code."
GIVE_UP_S = 20.0
SIZE = (120, 40)


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


NEWLINE_FREE = """\
import runpy, sys
import specmon.sim.tokenizer as tokenizer
whole = tokenizer.answer_tokens
def one_paragraph(*args, **kwargs):
    tokens, stopped = whole(*args, **kwargs)
    return [t.replace("\\n", " ") for t in tokens], stopped
tokenizer.answer_tokens = one_paragraph
sys.argv = ["specmon", *sys.argv[1:]]
runpy.run_module("specmon", run_name="__main__")
"""
"""The simulator with every newline of its answers made a space (benchmark only)."""

TEXTS = ("corpus", "newline-free")


def start_sim(speed: float, text: str = "corpus") -> tuple[subprocess.Popen, str]:
    launch = ["-m", "specmon"] if text == "corpus" else ["-c", NEWLINE_FREE]
    cmd = [sys.executable, *launch, "sim", "--port", "0", "--speed", repr(speed)]
    cmd += ["--log-interval", "0", "--profile", PROFILE, "--seed", "7"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next(word for word in line.split() if word.startswith("http://"))
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@dataclass
class Result:
    mode: str
    rate: float
    """Measured arrival rate, tokens per second of stream."""
    tokens: int
    chunks: int
    painted: int
    lags: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    gave_up: bool = False
    target: float = 0.0
    text: str = "corpus"
    collector_cpu_s: float = 0.0
    """Of `cpu_s`, the CPU of the session's collector process (the chat's; 0 in-process)."""

    def pct(self, q: float) -> float:
        if not self.lags:
            return float("nan")
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_monitor(url: str) -> Monitor:
    """The baselines' collector: a Monitor on a hub thread of this process."""
    return Monitor([Target(url)], state_factory(None), gpu=None)


def chat_session(url: str, gpu: str = "none") -> SessionFactory:
    """The chat's session, as `specmon chat --attach URL` opens it: the collector in a process
    of its own (runtime.session.open_session)."""
    return lambda: open_session(SessionConfig(targets=(Target(url),), gpu=gpu, quiet=True))


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) another process has used so far; 0 if unknown."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- specmon's chat


async def run_specmon(url: str, max_tokens: int, uncut: bool = False) -> Result:
    """`uncut`: lines are never cut inside (`blocks.RUN_CHARS` 0), as before that rule."""
    saved = blocks.RUN_CHARS
    if uncut:
        blocks.RUN_CHARS = 0
    try:
        result = await _run_specmon(url, max_tokens)
    finally:
        blocks.RUN_CHARS = saved
    if uncut:
        result.mode = "specmon chat, lines never cut inside (before)"
    return result


async def _run_specmon(url: str, max_tokens: int) -> Result:
    return await measure_chat(chat_session(url), max_tokens)


async def measure_chat(
    session: SessionFactory,
    max_tokens: int,
    *,
    temperature: float | None = None,
    settle_s: float = 0.3,
    give_up_after_s: float | None = None,
    on_done: Callable[[SpecmonApp, str, str], None] | None = None,
    mode: str = "specmon chat",
) -> Result:
    """One answer of `max_tokens` tokens (ignore_eos) in the headless chat: for every chunk that
    carried text, the lag from its arrival to the frame that painted it, and the CPU of this
    process and of the session's collector process (`collector_cpu_s`, included in `cpu_s`).
    `settle_s`: a pause before asking (a GPU sample or two); `give_up_after_s`: how long the
    answer may take (default: as at 50 tok/s, plus GIVE_UP_S); `on_done(app, shown, received)`:
    a look at the finished screen (a screenshot); without it, shown text must equal received."""
    port = LivePort(session)
    lags: list[float] = []
    done = asyncio.Event()
    feeds = []
    chunks_painted = [0]

    def on_frame(arrivals: tuple[float, ...], ended: bool) -> None:
        now = port.now()
        lags.extend(now - t for t in arrivals)
        chunks_painted[0] += len(arrivals)
        if ended:
            done.set()

    app = SpecmonApp(
        port,
        settings=ChatSettings(temperature=temperature, max_tokens=max_tokens),
        frame_hook=on_frame,
    )
    ask = port.ask

    def ask_ignoring_eos(request):
        feed = ask(replace(request, extra_body={"ignore_eos": True}))
        feeds.append(feed)
        return feed

    port.ask = ask_ignoring_eos  # type: ignore[method-assign]
    give_up = give_up_after_s if give_up_after_s is not None else max_tokens / 50 + GIVE_UP_S
    try:
        async with app.run_test(size=SIZE) as pilot:
            while not port.connected:
                await pilot.pause(0.05)
            await pilot.pause(settle_s)
            screen = app.screen
            pid = getattr(port.session, "pid", None)
            collector0 = process_cpu_s(pid)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            screen.send(PROMPT)  # type: ignore[attr-defined]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), give_up)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            collector = process_cpu_s(pid) - collector0
            await pilot.pause(0.5)
            view = next(iter(screen.query(AnswerView)))
            received = "".join(c.text or "" for c in feeds[0].chunks())
            if on_done is None:
                assert view.text == received, "text lost or reordered"
            else:
                on_done(app, view.text, received)
            numbers = port.numbers(feeds[0])
    finally:
        port.close()
    return Result(
        mode,
        numbers.decode_tok_s or float("nan"),
        numbers.tokens or 0,
        len(lags),
        chunks_painted[0],
        lags,
        cpu + collector,
        wall,
        gave_up=not done.is_set(),
        collector_cpu_s=collector,
    )


# ---------------------------------------------------------------- baselines


class BaselineApp(App[None]):
    """A bare Markdown widget: `update(full text)` per chunk, or MarkdownStream.write per chunk."""

    def __init__(self, stream: bool) -> None:
        super().__init__()
        self.use_stream = stream
        self.queue: asyncio.Queue[tuple[float, str] | None] = asyncio.Queue()
        self.lags: list[float] = []
        self.painted = 0
        self.finished = asyncio.Event()
        self.abandon = False
        self.clock = time.monotonic

    def compose(self) -> ComposeResult:
        yield Markdown()

    async def consume(self) -> None:
        md = self.query_one(Markdown)
        text = ""
        stream = Markdown.get_stream(md) if self.use_stream else None
        while True:
            item = await self.queue.get()
            if item is None:
                break
            t, fragment = item
            text += fragment
            if stream is not None:
                await stream.write(fragment)
            else:
                await md.update(text)
            self.call_after_refresh(self._painted, t)
            if self.abandon:
                break
        if stream is not None:
            await stream.stop()
        self.call_after_refresh(self.finished.set)

    def _painted(self, t: float) -> None:
        self.lags.append(self.clock() - t)
        self.painted += 1


async def run_baseline(url: str, max_tokens: int, stream: bool) -> Result:
    monitor = make_monitor(url)
    monitor.start()
    hub = monitor.hub
    app = BaselineApp(stream)
    app.clock = hub.clock
    rid = new_request_id()
    loop = asyncio.get_running_loop()
    ended: list[RequestEnded] = []
    chunks = [0]

    def subscriber(event: Event) -> None:
        if isinstance(event, StreamChunk) and event.request_id == rid and event.text:
            chunks[0] += 1
            loop.call_soon_threadsafe(app.queue.put_nowait, (event.t, event.text))
        elif isinstance(event, RequestEnded) and event.request_id == rid:
            ended.append(event)
            loop.call_soon_threadsafe(app.queue.put_nowait, None)

    hub.subscribe(subscriber)
    request = ChatRequest(prompt=PROMPT, max_tokens=max_tokens, extra_body={"ignore_eos": True})
    gave_up = False
    try:
        async with app.run_test(size=SIZE) as pilot:
            consumer = asyncio.ensure_future(app.consume())
            await pilot.pause(0.3)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            future = hub.submit(run_request(monitor.clients[0], request, hub.emit, request_id=rid))
            await asyncio.wrap_future(future)
            try:
                await asyncio.wait_for(app.finished.wait(), GIVE_UP_S)
            except TimeoutError:
                gave_up = True
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            app.abandon = True
            await consumer
    finally:
        monitor.stop()
    end = ended[0]
    return Result(
        "Markdown.get_stream per chunk" if stream else "Markdown.update per chunk",
        float("nan"),
        end.completion_tokens or 0,
        chunks[0],
        app.painted,
        app.lags,
        cpu,
        wall,
        gave_up,
    )


# ---------------------------------------------------------------- first paint


def first_paint(url: str) -> tuple[float, float] | None:
    """Seconds from launching `specmon chat` in a 120x40 pseudo-terminal to the header on screen
    and to the connected header (SIMULATED shown); None if it never showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat, in the pty
        os.execv(sys.executable, [sys.executable, "-m", "specmon", "chat", "--attach", url])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    t0 = time.perf_counter()
    seen = b""
    first = connected = None
    try:
        while time.perf_counter() - t0 < 30 and connected is None:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
            now = time.perf_counter() - t0
            if first is None and b"specmon chat" in seen:
                first = now
            if b"SIMULATED" in seen:
                connected = now
        os.write(fd, b"\x11")  # ctrl+q
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            with contextlib.suppress(OSError):
                if select.select([fd], [], [], 0.1)[0]:
                    os.read(fd, 65536)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if first is None or connected is None:
        return None
    return first, connected


# ---------------------------------------------------------------- main


async def calibrate() -> float:
    """Decode tok/s of the profile at --speed 1 (one request, 300 tokens)."""
    proc, url = start_sim(1.0)
    try:
        result = await run_specmon(url, 300)
    finally:
        stop(proc)
    return result.rate


async def main_async(
    rates: list[float], seconds: float, modes: list[str], texts: list[str]
) -> list[Result]:
    base = await calibrate()
    print(f"calibration: {base:.1f} tok/s at --speed 1", flush=True)
    results: list[Result] = []
    for rate in rates:
        max_tokens = int(rate * seconds)
        for text in texts:
            proc, url = start_sim(rate / base, text)
            try:
                for mode in modes:
                    if mode in ("specmon", "specmon-uncut"):
                        r = await run_specmon(url, max_tokens, uncut=mode == "specmon-uncut")
                    else:
                        r = await run_baseline(url, max_tokens, stream=mode == "stream")
                        r.rate = rate * r.tokens / max(1, max_tokens)
                    r.target = rate
                    r.text = text
                    results.append(r)
                    print(row(r, with_text=True), flush=True)
            finally:
                stop(proc)
    return results


CHILD = """\
import asyncio, dataclasses, importlib.util, json, sys, time
path, base, rates, seconds, texts = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("chat_render_tree", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
async def calibrated():
    return float(base)
mod.calibrate = calibrated
readings = []
if not hasattr(mod, "chat_session"):
    # That tree's chat_render gave the chat a Monitor in this process; its `specmon chat` ran
    # a CollectorProcess: measure what the user ran, and count the collector's CPU.
    from specmon.cli.session_setup import state_factory
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import CollectorProcess, SessionConfig
    sessions = []
    def make(url):
        config = SessionConfig(targets=(Target(url),), quiet=True)
        sessions.append(CollectorProcess(config, state_factory(None)))
        return sessions[-1]
    mod.make_monitor = make
    class Clock:
        def __getattr__(self, name):
            return getattr(time, name)
        def process_time(self):
            collector = mod.process_cpu_s(sessions[-1].pid) if sessions else 0.0
            readings.append(collector)
            return time.process_time() + collector
    def process_cpu_s(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, TypeError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    import os
    mod.process_cpu_s = process_cpu_s
    mod.time = Clock()
results = asyncio.run(
    mod.main_async([float(r) for r in rates.split(",")], float(seconds), ["specmon"],
                   texts.split(","))
)
rows = [dataclasses.asdict(r) for r in results]
for i, r in enumerate(rows):
    if readings:
        r["collector_cpu_s"] = readings[2 * i + 1] - readings[2 * i]
print("RESULTS " + json.dumps(rows), flush=True)
"""
"""`--before`'s child: one tree's chat_render.main_async with the calibration given."""


def run_tree(
    tree: Path, base: float, rates: list[float], seconds: float, texts: list[str]
) -> list[Result]:
    """specmon's chat with `tree`'s code (its src/ and its benchmarks/chat_render.py), in a child
    process; its results."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{tree}")
    script = tree / "benchmarks" / "chat_render.py"
    args = [str(script), repr(base), ",".join(map(repr, rates)), repr(seconds), ",".join(texts)]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, check=False
    )
    for line in out.stdout.splitlines():
        if line.startswith("RESULTS "):
            known = {f.name for f in fields(Result)}
            return [
                Result(**{k: v for k, v in r.items() if k in known})
                for r in json.loads(line.removeprefix("RESULTS "))
            ]
    raise RuntimeError(f"{tree}: no results (exit {out.returncode}): {out.stderr[-2000:]}")


def before_after(
    before: Path, rounds: int, rates: list[float], seconds: float, texts: list[str]
) -> list[str]:
    """`--before`: the two trees alternately, `rounds` times; the table and a p50/p99 summary."""
    base = asyncio.run(calibrate())
    print(f"calibration: {base:.1f} tok/s at --speed 1", flush=True)
    here = Path(__file__).resolve().parents[1]
    head, rule = header(with_text=True).split("\n")
    table = [f"| round | tree {head}", f"|---:|---{rule}"]
    seen: dict[tuple[str, float, str], list[Result]] = {}
    for i in range(1, rounds + 1):
        for name, tree in (("before", before), ("after", here)):
            for r in run_tree(tree, base, rates, seconds, texts):
                seen.setdefault((name, r.target, r.text), []).append(r)
                table.append(f"| {i} | {name} {row(r, with_text=True)}")
                print(table[-1], flush=True)
    summary = [
        "",
        "| tree | target tok/s | text | rounds | median p50 ms | median p99 ms | "
        "worst p99 ms | median CPU (cores) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (name, target, text), rs in seen.items():
        p50 = statistics.median(r.pct(0.5) for r in rs) * 1000
        p99s = [r.pct(0.99) * 1000 for r in rs]
        cores = statistics.median(r.cpu_s / r.wall_s for r in rs if r.wall_s)
        summary.append(
            f"| {name} | {target:.0f} | {text} | {len(rs)} | {p50:.0f} | "
            f"{statistics.median(p99s):.0f} | {max(p99s):.0f} | {cores:.2f} |"
        )
    return [*table, *summary]


def header(with_text: bool = False) -> str:
    text = " text |" if with_text else ""
    rule = "---|" if with_text else ""
    return (
        f"| target tok/s |{text} mode | tokens | measured tok/s | chunks | painted | lag p50 ms | "
        "lag p99 ms | lag max ms | CPU s | collector CPU s | wall s | CPU (cores) |\n"
        f"|---:|{rule}---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )


def row(r: Result, with_text: bool = False) -> str:
    more = " (gave up: lower bound)" if r.gave_up else ""
    text = f" {r.text} |" if with_text else ""
    return (
        f"| {r.target:.0f} |{text} {r.mode}{more} | {r.tokens} | {r.rate:.0f} | {r.chunks} | "
        f"{r.painted} | "
        f"{r.pct(0.5) * 1000:.0f} | {r.pct(0.99) * 1000:.0f} | "
        f"{(max(r.lags) if r.lags else float('nan')) * 1000:.0f} | {r.cpu_s:.2f} | "
        f"{r.collector_cpu_s:.2f} | {r.wall_s:.2f} | "
        f"{r.cpu_s / r.wall_s if r.wall_s else float('nan'):.2f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,600,5000")
    parser.add_argument("--seconds", type=float, default=3.0, help="stream length per case")
    parser.add_argument("--modes", default="specmon,update,stream")
    parser.add_argument(
        "--texts", default="corpus", help="corpus and/or newline-free (one endless paragraph)"
    )
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--before", type=Path, default=None, metavar="DIR",
        help="a tree with an older src/ and benchmarks/: specmon's chat only, that tree's code "
        "and this one's alternately",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="with --before: how many rounds")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    modes = args.modes.split(",")
    texts = args.texts.split(",")
    if unknown := sorted(set(texts) - set(TEXTS)):
        parser.error(f"--texts: unknown {', '.join(unknown)} (known: {', '.join(TEXTS)})")
    lines = [
        f"chat_render {datetime.date.today()} on {machine()}",
        f"profile {PROFILE}, {args.seconds:g} s of stream per case, headless Textual {SIZE}",
        "",
    ]
    print("\n".join(lines), flush=True)
    if args.before is not None:
        lines[0] += f"; before: {args.before}, after: this tree, alternately, {args.rounds} rounds"
        text = "\n".join(
            [*lines, *before_after(args.before, args.rounds, rates, args.seconds, texts), ""]
        )
        print(text)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        return 0
    results = asyncio.run(main_async(rates, args.seconds, modes, texts))
    table = [header(with_text=True)]
    table += [row(r, with_text=True) for r in results]
    proc, url = start_sim(1.0)
    try:
        paint = first_paint(url)
    finally:
        stop(proc)
    paint_line = (
        "first paint of `specmon chat`: not seen"
        if paint is None
        else f"first paint of `specmon chat` (120x40 pty): header {paint[0]:.2f} s, "
        f"connected header {paint[1]:.2f} s after launch"
    )
    text = "\n".join([*lines, *table, "", paint_line, ""])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
