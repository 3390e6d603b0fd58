"""How fast the chat shows streamed text, and what it costs: specmon's chat against a bare
Textual Markdown widget re-rendered for every chunk (and, for reference, Textual's MarkdownStream),
side by side in one run, at rising simulator rates.

The simulator runs in its own process (`specmon sim`, profile gemma4-26b-h100, no schedule), paced
with `--speed` so the decode rate is about 100, 600 and 5,000 tok/s (a calibration request measures
the rate at --speed 1 first). This process runs the hub (stream client) and the headless Textual
app. For every chunk that carried text we take its arrival time (the hub's clock, when the client
got it) and the time the frame that contains it was painted; lag = painted - arrived. CPU is this
process's CPU time (all threads: stream client and UI) over the wall time from the request's send
to the last chunk painted. A mode that is still painting 20 s after the stream ended is stopped
and its lag reported as a lower bound.

Mode `specmon-uncut` is specmon's chat with a line never cut inside (`blocks.RUN_CHARS` 0: the
renderer before that rule), for a before/after ratio in one run.

`--texts corpus,newline-free` runs each case with the simulator's own answers (paragraphs,
lists, code blocks) and with the same words as ONE endless paragraph: every newline of the
answer's tokens replaced by a space in the simulator process (as a tiny random model writes, seen
on a real GPU vLLM), the text that never settles at a line boundary.

Also measured: the first paint of `specmon chat` in a pseudo-terminal (120x40), from launch to
the header on screen, and to the connected header (server identified).

Usage: python benchmarks/chat_render.py [--rates 100,600,5000] [--seconds 3] [--out FILE]
       [--modes specmon,specmon-uncut,update,stream] [--texts corpus,newline-free]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import fcntl
import os
import platform
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from specmon.core.events import Event, RequestEnded, StreamChunk
from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Monitor, Target
from specmon.runtime.prompt_loop import run_request
from specmon.sources.stream_client import ChatRequest, new_request_id
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.live_port import LivePort
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

    def pct(self, q: float) -> float:
        if not self.lags:
            return float("nan")
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_monitor(url: str) -> Monitor:
    return Monitor([Target(url)], state_factory(None), gpu=None)


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
    return await measure_chat(lambda: make_monitor(url), max_tokens)


async def measure_chat(
    monitor: Callable[[], Monitor],
    max_tokens: int,
    *,
    temperature: float | None = None,
    settle_s: float = 0.3,
    give_up_after_s: float | None = None,
    on_done: Callable[[SpecmonApp, str, str], None] | None = None,
    mode: str = "specmon chat",
) -> Result:
    """One answer of `max_tokens` tokens (ignore_eos) in the headless chat: for every chunk that
    carried text, the lag from its arrival to the frame that painted it, and this process's CPU.
    `settle_s`: a pause before asking (a GPU sample or two); `give_up_after_s`: how long the
    answer may take (default: as at 50 tok/s, plus GIVE_UP_S); `on_done(app, shown, received)`:
    a look at the finished screen (a screenshot); without it, shown text must equal received."""
    port = LivePort(monitor)
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
            cpu0, wall0 = time.process_time(), time.perf_counter()
            screen.send(PROMPT)  # type: ignore[attr-defined]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), give_up)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
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
        cpu,
        wall,
        gave_up=not done.is_set(),
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


def header(with_text: bool = False) -> str:
    text = " text |" if with_text else ""
    rule = "---|" if with_text else ""
    return (
        f"| target tok/s |{text} mode | tokens | measured tok/s | chunks | painted | lag p50 ms | "
        "lag p99 ms | lag max ms | CPU s | wall s | CPU (cores) |\n"
        f"|---:|{rule}---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )


def row(r: Result, with_text: bool = False) -> str:
    more = " (gave up: lower bound)" if r.gave_up else ""
    text = f" {r.text} |" if with_text else ""
    return (
        f"| {r.target:.0f} |{text} {r.mode}{more} | {r.tokens} | {r.rate:.0f} | {r.chunks} | "
        f"{r.painted} | "
        f"{r.pct(0.5) * 1000:.0f} | {r.pct(0.99) * 1000:.0f} | "
        f"{(max(r.lags) if r.lags else float('nan')) * 1000:.0f} | {r.cpu_s:.2f} | "
        f"{r.wall_s:.2f} | {r.cpu_s / r.wall_s if r.wall_s else float('nan'):.2f} |"
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
