"""Soak under faults: `watch --json` on three faulty simulators plus chat-style streaming at about
5,000 tok/s, for a while; RSS, CPU and errors of every specmon process.

Run:  PYTHONPATH=src python benchmarks/soak_faults.py [--seconds 600] [--speed 30]

What runs (all on 127.0.0.1, all stopped at the end, SIGINT then SIGKILL after 5 s):
- three `specmon sim` processes whose schedules switch faults on, request after request: a
  counter restart, a stall, a malformed and a truncated /metrics page, a dropped stream
  (`cycle:...`, see SCHEDULE; docs/simulator.md);
- `specmon watch --json --interval 0.5` attached to the three; every line it prints is parsed
  (a line that is not one JSON object is an error) and the statuses it reports are counted;
- a chat client: this script in `--chat URL` mode, a specmon collector (Monitor: hub, state,
  scraper, the stream client `specmon chat` uses) sending chat requests one after another to the
  first simulator, run at `--speed` (default 30: about 5,000 tok/s generated, answers of
  `--max-tokens` 2048, on the default profile);
- light traffic (one short request every 0.5 s) to the other two, so their schedules advance.

Every second the RSS and CPU time of each process are read from /proc. At the end a table gives,
per process: RSS at the start (the first sample after `--warmup` seconds), at the end and at its
highest, the growth from start to end, the mean CPU % over the run, and the errors: tracebacks
and error lines on stderr, and for watch its unreadable output lines. Exit status 0 when no
specmon process wrote a traceback or died, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

SCHEDULE = (
    "cycle:3f,1f+restart,2f,1t+stall=2,2f,1f+metrics=malformed,2d,1f+metrics=truncated,"
    "1f+drop-after=20,1r"
)
"""Faults every 15 requests: a restart (counters back to 0), a 2 s stall (model seconds, ÷ speed),
a malformed and a truncated /metrics page (the next scrape), a stream dropped after 20 tokens."""

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """One process of the soak, its samples and what it said on stderr."""

    role: str
    popen: subprocess.Popen[bytes]
    rss: list[tuple[float, int]] = field(default_factory=list)
    cpu: list[tuple[float, float]] = field(default_factory=list)
    stderr_lines: int = 0
    tracebacks: int = 0
    error_lines: int = 0
    last_errors: list[str] = field(default_factory=list)

    def sample(self, now: float) -> None:
        pid = self.popen.pid
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/statm") as f:
                resident = int(f.read().split()[1]) * PAGE_SIZE
        except (OSError, IndexError, ValueError):
            return  # gone
        self.cpu.append((now, (int(fields[11]) + int(fields[12])) / TICKS))
        self.rss.append((now, resident))

    def read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            self.stderr_lines += 1
            if line.startswith("Traceback"):
                self.tracebacks += 1
            if re.search(r"\b\w*(Error|Exception)\b", line) and not line.startswith(" "):
                self.error_lines += 1
                self.last_errors = ([*self.last_errors, line])[-3:]


def _specmon(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "specmon", *args]


def start_sim(speed: float, seed: int) -> tuple[Proc, str]:
    sim_args = f"sim --port 0 --speed {speed:g} --seed {seed} --log-interval 0".split()
    popen = subprocess.Popen(
        _specmon([*sim_args, "--schedule", SCHEDULE]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert popen.stdout is not None and popen.stderr is not None
    first = popen.stdout.readline().decode()
    match = re.search(r"on (http://127\.0\.0\.1:\d+)", first)
    if match is None:
        popen.kill()
        raise SystemExit(f"soak: the simulator did not start: {first!r}")
    proc = Proc(f"sim (seed {seed})", popen)
    threading.Thread(target=proc.read_stderr, args=(popen.stderr,), daemon=True).start()
    threading.Thread(target=popen.stdout.read, daemon=True).start()  # drain
    return proc, match.group(1)


@dataclass
class WatchOutput:
    lines: int = 0
    bad_lines: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    details: Counter[str] = field(default_factory=Counter)
    resets: dict[str, int] = field(default_factory=dict)
    last_servers: int = 0

    def read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines += 1
            try:
                snap = json.loads(raw)
                servers = snap["servers"]
            except (ValueError, KeyError, TypeError):
                self.bad_lines += 1
                continue
            self.last_servers = len(servers)
            for url, s in servers.items():
                self.statuses[str(s.get("status"))] += 1
                if s.get("status") != "up" and s.get("status_detail"):
                    self.details[re.sub(r"\d+", "N", s["status_detail"])[:70]] += 1
                self.resets[url] = int(s.get("counter_resets") or 0)


def light_traffic(urls: list[str], stop: threading.Event) -> None:
    import httpx

    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": "Say something short."}],
        "max_tokens": 32,
        "stream": True,
    }
    with httpx.Client(timeout=30.0) as client:
        while not stop.wait(0.5):
            for url in urls:
                try:
                    models = client.get(url + "/v1/models").json()["data"]
                    body["model"] = models[0]["id"]
                    with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                        for _ in r.iter_bytes():
                            pass
                except (httpx.HTTPError, ValueError, KeyError, IndexError):
                    pass  # a dropped stream is one of the faults


def chat_mode(url: str, seconds: float, max_tokens: int) -> int:
    """The chat client: specmon's collector streaming chat requests one after another."""
    from specmon.core.events import SessionInfo
    from specmon.core.session_state import SessionState
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sources.stream_client import ChatRequest

    def state_factory(info: SessionInfo) -> SessionState:
        return SessionState(info)

    monitor = Monitor([Target(url)], state_factory, interval=1.0)
    monitor.start()
    prompts = [
        ChatRequest(
            f"Write a long story about lighthouse keeper number {i}.", max_tokens=max_tokens
        )
        for i in range(8)
    ]
    started = time.monotonic()
    monitor.prompt_loop(prompts)
    time.sleep(seconds)
    view = monitor.view(fresh=True)
    wall = time.monotonic() - started
    monitor.stop()
    summary = view.summary
    server = view.servers[0] if view.servers else None
    # The server's generated tokens over the run (reset-corrected; only this client talks to it).
    tokens = server.totals.generation_tokens if server is not None else None
    print(
        json.dumps(
            {
                "requests": summary.total,
                "ok": summary.ok,
                "failed": summary.failed,
                "rows_kept": summary.rows_kept,
                "tokens": tokens,
                "mean_decode_tok_s": summary.mean_decode_tok_s,
                "wall_s": wall,
                "hub_errors": list(monitor.hub.errors)[-5:],
            }
        ),
        flush=True,
    )
    return 0


def stop_process(proc: Proc) -> int | None:
    if proc.popen.poll() is None:
        proc.popen.send_signal(signal.SIGINT)
        try:
            return proc.popen.wait(5)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()
            return None
    return proc.popen.returncode


def _mib(n: int | None) -> str:
    return "—" if n is None else f"{n / 2**20:.1f}"


def table(procs: list[Proc], warmup: float, t0: float) -> list[str]:
    rows = [
        "| process | RSS start MiB | RSS end MiB | RSS max MiB | growth MiB | growth % | CPU % "
        "| tracebacks | error lines |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in procs:
        after = [(t, r) for t, r in p.rss if t - t0 >= warmup] or p.rss
        start = after[0][1] if after else None
        end = after[-1][1] if after else None
        top = max(r for _t, r in after) if after else None
        growth = (end - start) if start is not None and end is not None else None
        pct = f"{100 * growth / start:+.1f}" if growth is not None and start else "—"
        cpu = "—"
        if len(p.cpu) >= 2 and p.cpu[-1][0] > p.cpu[0][0]:
            cpu = f"{100 * (p.cpu[-1][1] - p.cpu[0][1]) / (p.cpu[-1][0] - p.cpu[0][0]):.1f}"
        rows.append(
            f"| {p.role} | {_mib(start)} | {_mib(end)} | {_mib(top)} | "
            f"{'—' if growth is None else f'{growth / 2**20:+.1f}'} | {pct} | {cpu} | "
            f"{p.tracebacks} | {p.error_lines} |"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="soak duration (600)")
    parser.add_argument("--speed", type=float, default=30.0, help="simulator pace (30)")
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens per chat answer")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before RSS start")
    parser.add_argument("--chat", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chat:
        return chat_mode(args.chat, args.seconds, args.max_tokens)
    warmup = args.warmup if args.warmup is not None else min(10.0, args.seconds / 6)

    procs: list[Proc] = []
    sims: list[str] = []
    stop = threading.Event()
    try:
        for seed in (1, 2, 3):
            proc, url = start_sim(args.speed, seed)
            procs.append(proc)
            sims.append(url)
        t0 = time.monotonic()
        watch_args = ["watch", "--json", "--interval", "0.5", "--gpu", "none"]
        for url in sims:
            watch_args += ["--attach", url]
        watch = subprocess.Popen(
            _specmon(watch_args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        watch_proc = Proc("watch --json (3 servers)", watch)
        procs.insert(0, watch_proc)
        output = WatchOutput()
        assert watch.stdout is not None and watch.stderr is not None
        threading.Thread(target=output.read, args=(watch.stdout,), daemon=True).start()
        threading.Thread(target=watch_proc.read_stderr, args=(watch.stderr,), daemon=True).start()
        chat = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--chat",
                sims[0],
                "--seconds",
                f"{args.seconds:g}",
                "--max-tokens",
                str(args.max_tokens),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        chat_proc = Proc(f"chat client → {sims[0].rsplit(':', 1)[-1]}", chat)
        procs.insert(1, chat_proc)
        assert chat.stderr is not None and chat.stdout is not None
        threading.Thread(target=chat_proc.read_stderr, args=(chat.stderr,), daemon=True).start()
        threading.Thread(target=light_traffic, args=(sims[1:], stop), daemon=True).start()

        end = t0 + args.seconds
        while time.monotonic() < end:
            now = time.monotonic()
            for p in procs:
                p.sample(now)
            time.sleep(1.0)
        chat_summary: dict[str, Any] = {}
        try:
            out, _ = chat.communicate(timeout=30)
            chat_summary = json.loads(out.decode().strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            chat_summary = {"error": "the chat client gave no summary"}
    finally:
        stop.set()
        codes = {p.role: stop_process(p) for p in procs}
    time.sleep(0.5)  # let the stderr readers finish

    print(f"soak: {args.seconds:g} s, 3 simulators at speed {args.speed:g}, schedule {SCHEDULE}")
    print("\n".join(table(procs, warmup, t0)))
    chat_s = float(chat_summary.get("wall_s") or 0) or None
    tokens = chat_summary.get("tokens")
    rate = f"{tokens / chat_s:.0f}" if tokens and chat_s else "—"
    print(
        f"\nchat client: {chat_summary.get('requests')} requests ({chat_summary.get('ok')} ok, "
        f"{chat_summary.get('failed')} failed by the drop fault), {rate} tok/s generated over "
        f"the run (mean decode {chat_summary.get('mean_decode_tok_s') or 0:.0f} tok/s)"
        + (f"; hub errors: {chat_summary['hub_errors']}" if chat_summary.get("hub_errors") else "")
    )
    print(
        f"watch: {output.lines} lines, {output.bad_lines} not JSON, servers in the last line: "
        f"{output.last_servers}; statuses seen {dict(output.statuses)}; counter resets "
        f"{sorted(output.resets.values())}"
    )
    for detail, n in output.details.most_common(6):
        print(f"  {n} x {detail}")
    print(f"exit codes after SIGINT: {codes}")
    for p in procs:
        for line in p.last_errors:
            print(f"  {p.role} stderr: {line[:160]}")
    died = [
        role for role, code in codes.items() if code not in (0, 130) and not role.startswith("chat")
    ]
    bad = sum(p.tracebacks for p in procs) + output.bad_lines
    return 1 if bad or died or output.last_servers != 3 else 0


if __name__ == "__main__":
    sys.exit(main())
