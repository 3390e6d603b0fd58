"""Can rendering skew the arrival times specmon records? (docs/benchmarks.md, "Arrival skew")

Setup, per target rate (~100, ~600, ~5,000 tok/s):

    specmon sim (its own process)  <--  tap proxy (its own process)  <--  UI process
                                         timestamps every SSE event      hub + StreamClient
                                         as it passes (the reference)    + a Textual app

- The simulator runs as `python -m specmon sim` at a pace multiplier chosen for the rate.
- The tap proxy is a TCP relay in a separate process: for each server->client SSE `data:` event it
  records `time.monotonic()` when the bytes arrive, before forwarding them. It is the reference
  "taken outside the UI process on the same stream".
- The UI process runs specmon's collector (`--mode inproc`: a Monitor, i.e. hub thread,
  StreamClient, /metrics scraper, in this process; `--mode process`: the same in a collector
  process of its own, `runtime.session.CollectorProcess`, as every live screen runs it) with the
  hub's clock = time.monotonic (CLOCK_MONOTONIC is system-wide on Linux, so both
  processes' times compare directly), and, in `--ui` mode, a headless Textual app on the main
  thread that streams the answer into a Markdown widget through `Markdown.get_stream` at 20 Hz and
  redraws a dashboard (the snapshot as a table) at 4 Hz. `--ui none` runs the same collector with
  an idle main thread: the baseline.
- For each chunk: skew = t(specmon) - t(proxy). Reported: p50/p99 of the skew (minus the idle
  baseline's median, the relay's own latency), the error of every ITL (|ITL specmon - ITL proxy|)
  and of every TTFT.

Run:  PYTHONPATH=src python benchmarks/arrival_skew.py [--requests N] [--mode inproc|process]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RATES = {100: 0.5, 600: 3.0, 5000: 25.0}  # target tok/s -> sim pace multiplier (measured below)


# --------------------------------------------------------------------------- the tap proxy


async def _proxy_main(upstream_port: int, out_path: str) -> None:
    events: list[dict[str, Any]] = []
    conn_ids = iter(range(1, 10**9))

    async def pipe_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def pipe_down(
        conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        buf = b""
        try:
            while data := await reader.read(65536):
                t = time.monotonic()  # arrival at the tap, before anything else
                buf += data
                while b"\n\n" in buf:
                    block, buf = buf.split(b"\n\n", 1)
                    for line in block.split(b"\n"):
                        if line.startswith(b"data: ") and line != b"data: [DONE]":
                            events.append({"conn": conn, "t": t, "data": line[6:].decode()})
                if len(buf) > 1 << 20:
                    buf = b""
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        conn = next(conn_ids)
        sreader, swriter = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(pipe_up(creader, swriter), pipe_down(conn, sreader, cwriter))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()
    Path(out_path).write_text(json.dumps(events))


# --------------------------------------------------------------------------- helpers


def _start_line(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    i = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[i]


# --------------------------------------------------------------------------- the UI process


class HubThreadSession:
    """`--mode inproc`: the collector on a hub thread of this process (a `runtime.monitor.Monitor`,
    as the commands without a live screen run it), with the few calls of a live session this
    benchmark makes. No command runs a live screen this way any more (`open_session` always puts
    the collector in its own process); it stays here as the comparison that decided it."""

    def __init__(self, url: str) -> None:
        from specmon.core.session_state import SessionState
        from specmon.runtime.hub import Hub
        from specmon.runtime.monitor import Monitor, Target

        self.monitor = Monitor(
            [Target(url)], SessionState, interval=1.0, hub=Hub(clock=time.monotonic)
        )

    def start(self) -> None:
        self.monitor.start()

    def subscribe(self, subscriber: Any) -> None:
        self.monitor.hub.subscribe(subscriber)

    def submit_chat(self, request: Any) -> str:
        from specmon.runtime.prompt_loop import run_request
        from specmon.sources.stream_client import new_request_id

        rid = new_request_id()
        monitor, hub = self.monitor, self.monitor.hub
        scraper = monitor.scrapers[0]
        hub.submit(
            run_request(monitor.clients[0], request, hub.emit, scraper=scraper, request_id=rid)
        )
        return rid

    def snapshot(self) -> dict[str, Any]:
        return self.monitor.snapshot()

    def stop(self) -> None:
        self.monitor.stop()


def _collect(url: str, requests: int, ui: bool, max_tokens: int, mode: str) -> dict[str, Any]:
    """Run a session (collector on a hub thread of this process, or in its own process as every
    live screen runs it) with or without a Textual app rendering on this process's main thread;
    sends `requests` chats one after another."""
    from specmon.core.events import RequestEnded, StreamChunk
    from specmon.core.session_state import SessionState
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import CollectorProcess, SessionConfig
    from specmon.sources.stream_client import ChatRequest

    config = SessionConfig(targets=(Target(url),), interval=1.0, absolute_clock=True)
    session: CollectorProcess | HubThreadSession = (
        CollectorProcess(config, SessionState) if mode == "process" else HubThreadSession(url)
    )
    chunks: list[tuple[str, float, str]] = []
    text: list[str] = []
    ended: queue.SimpleQueue[str] = queue.SimpleQueue()

    def tap(event: object) -> None:
        if isinstance(event, StreamChunk):
            chunks.append((event.request_id, event.t, event.text))
            text.append(event.text)
        elif isinstance(event, RequestEnded):
            ended.put(event.request_id)

    session.start()
    session.subscribe(tap)
    done = threading.Event()
    prompt = ChatRequest("Write a long essay with code blocks about caches.", max_tokens=max_tokens)

    warmup: list[str] = []

    def drive() -> None:
        for i in range(requests + 1):  # the first one warms the client up; not measured
            rid = session.submit_chat(prompt)
            if i == 0:
                warmup.append(rid)
            while ended.get() != rid:
                pass
        done.set()

    threading.Thread(target=drive, daemon=True).start()
    cpu0 = time.process_time()
    wall0 = time.monotonic()
    if ui:
        _run_textual(session, text, done)
    else:
        done.wait()
    cpu = time.process_time() - cpu0
    wall = time.monotonic() - wall0
    session.stop()
    skip = sum(1 for c in chunks if c[0] in warmup)
    return {"chunks": chunks[skip:], "skip": skip, "cpu_share": cpu / wall}


def _run_textual(session: Any, text: list[str], done: threading.Event) -> None:
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.widgets import DataTable, Markdown

    class Bench(App[None]):
        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield Markdown(id="answer")
            yield DataTable(id="dash")

        async def on_ready(self) -> None:
            self.md = self.query_one(Markdown)
            self.stream = Markdown.get_stream(self.md)
            self.seen = 0
            table = self.query_one(DataTable)
            table.add_columns("key", "value")
            self.set_interval(1 / 20, self.pump_text)
            self.set_interval(1 / 4, self.pump_numbers)
            self.set_interval(0.1, self.check_done)

        async def pump_text(self) -> None:
            n = len(text)
            if n > self.seen:
                fragment = "".join(text[self.seen : n])
                self.seen = n
                await self.stream.write(fragment)

        def pump_numbers(self) -> None:
            snap = session.snapshot()
            table = self.query_one(DataTable)
            table.clear()
            for key, value in _flatten(snap)[:200]:
                table.add_row(key, str(value)[:60])

        async def check_done(self) -> None:
            if done.is_set():
                await self.stream.stop()
                self.exit()

    async def main() -> None:
        app = Bench()
        async with app.run_test(size=(160, 50)) as pilot:
            while app.is_running:
                await pilot.pause(0.2)

    asyncio.run(main())


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            out += _flatten(v, f"{prefix}[{i}]")
    else:
        out.append((prefix, obj))
    return out


# --------------------------------------------------------------------------- one measurement


def measure(speed: float, ui: bool, requests: int, max_tokens: int, mode: str) -> dict[str, Any]:
    env = dict(os.environ)
    sim_args = ["sim", "--port", "0", "--speed", str(speed), "--log-interval", "0"]
    sim, line = _start_line([sys.executable, "-m", "specmon", *sim_args], env)
    sim_url = next(w for w in line.split() if w.startswith("http://"))
    sim_port = int(sim_url.rsplit(":", 1)[1])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "tap.json")
        proxy, port = _start_line([sys.executable, __file__, "--proxy", str(sim_port), out], env)
        url = f"http://127.0.0.1:{port}"
        try:
            got = _collect(url, requests, ui, max_tokens, mode)
        finally:
            proxy.send_signal(signal.SIGTERM)
            proxy.wait(30)
            sim.send_signal(signal.SIGTERM)
            sim.wait(30)
        tap = json.loads(Path(out).read_text())
    return _compare(got, tap)


def _compare(got: dict[str, Any], tap: list[dict[str, Any]]) -> dict[str, Any]:
    # Reference events with choices, in order (the chat streams; /v1/models etc. have no data:).
    ref = []
    for e in tap:
        body = json.loads(e["data"])
        if body.get("choices"):
            ref.append((e["conn"], e["t"]))
    ref = ref[got["skip"] :]
    mine = got["chunks"]
    n = min(len(ref), len(mine))
    skews = [mine[i][1] - ref[i][1] for i in range(n)]
    itl_err = []
    for i in range(1, n):
        if mine[i][0] == mine[i - 1][0]:
            itl_err.append(abs((mine[i][1] - mine[i - 1][1]) - (ref[i][1] - ref[i - 1][1])))
    # TTFT error = skew of each request's first content chunk (the send time is the same clock).
    firsts, seen = [], set()
    for i in range(n):
        rid = mine[i][0]
        if rid not in seen and mine[i][2]:
            seen.add(rid)
            firsts.append(skews[i])
    tokens_s = 0.0
    if n > 1:
        span = ref[n - 1][1] - ref[0][1]
        tokens_s = n / span if span > 0 else 0.0
    return {
        "chunks": n,
        "mismatch": len(ref) - len(mine),
        "chunks_s": tokens_s,
        "skew_p50_ms": 1000 * _pct(skews, 50),
        "skew_p99_ms": 1000 * _pct(skews, 99),
        "itl_err_p50_ms": 1000 * _pct(itl_err, 50),
        "itl_err_p99_ms": 1000 * _pct(itl_err, 99),
        "ttft_err_p50_ms": 1000 * _pct(firsts, 50),
        "ttft_err_p99_ms": 1000 * _pct(firsts, 99),
        "ui_cpu_share": got.get("cpu_share"),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--proxy":
        asyncio.run(_proxy_main(int(sys.argv[2]), sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--mode", choices=("inproc", "process"), default="inproc")
    ap.add_argument("--rates", default="100,600,5000")
    args = ap.parse_args()
    print(f"# arrival skew, mode={args.mode}, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")
    print("rate  ui    chunks/s  skew p50/p99 ms  ITL err p50/p99 ms  TTFT err p50/p99 ms  UI CPU")
    for rate in (int(r) for r in args.rates.split(",")):
        for ui in (False, True):
            r = measure(RATES[rate], ui, args.requests, args.max_tokens, args.mode)
            print(
                f"{rate:>5} {'yes' if ui else 'no ':4} {r['chunks_s']:8.0f}  "
                f"{r['skew_p50_ms']:6.2f} / {r['skew_p99_ms']:6.2f}  "
                f"{r['itl_err_p50_ms']:6.2f} / {r['itl_err_p99_ms']:6.2f}     "
                f"{r['ttft_err_p50_ms']:6.2f} / {r['ttft_err_p99_ms']:6.2f}     "
                f"{r['ui_cpu_share']:.2f}  (chunks {r['chunks']}, unmatched {r['mismatch']})",
                flush=True,
            )


if __name__ == "__main__":
    main()
