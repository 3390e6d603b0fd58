"""What a browser page of `specmon web demo` costs: the time from a page's websocket connecting
to the app's first SIMULATED frame, the memory of one page's app (its whole process group: the
app, its collector process, multiprocessing's resource tracker) beside the server's own, and the
time from Ctrl-C (SIGINT) to the server's exit with several pages open, checking that no app
process is left.

Run:  PYTHONPATH=src python benchmarks/web_sessions.py [--pages 3] [--rounds 3]

Pages are opened through textual-serve's websocket protocol (what the page's script speaks), not
a browser: the browser's own cost is not specmon's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.web helpers

from tests.support.waiting import wait_for
from tests.support.web_serving import group_alive, start_web

SIZE = {"width": 140, "height": 40}


def pss_kib(pids: list[int]) -> int:
    """Proportional set size (shared pages split between their users), summed: what these
    processes add to the machine's memory, without counting shared libraries once per process."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


async def first_frame(
    http: aiohttp.ClientSession, ws_url: str, headers: dict[str, str]
) -> tuple[object, float]:
    t0 = time.perf_counter()
    ws = await http.ws_connect(
        f"{ws_url}?width={SIZE['width']}&height={SIZE['height']}", headers=headers
    )
    await ws.send_json(["resize", SIZE])
    seen = b""
    while b"SIMULATED" not in seen:
        message = await ws.receive(timeout=120)
        if message.type != aiohttp.WSMsgType.BINARY:
            raise RuntimeError(f"page closed: {message.type!r}")
        seen += message.data
    return ws, time.perf_counter() - t0


async def round_(pages: int) -> dict[str, object]:
    run = start_web("demo")
    server_pss = pss_kib([run.proc.pid])
    starts: list[float] = []
    async with aiohttp.ClientSession() as http:
        sockets = []
        for _ in range(pages):
            ws, seconds = await first_frame(http, run.ws_url, run.headers)
            sockets.append(ws)
            starts.append(seconds)
        wait_for(lambda: len(run.apps()) == pages, f"{pages} apps")
        await asyncio.sleep(3.0)  # the demo answering: steady memory
        apps = run.apps()
        page_pss = [pss_kib(group_alive(pid)) for pid in apps]
        server_pss_loaded = pss_kib([run.proc.pid])
        t0 = time.perf_counter()
        code = run.stop()
        stop_s = time.perf_counter() - t0
    left = [pid for app in apps for pid in group_alive(app)]
    run.kill()
    return {
        "first_frame_s": starts,
        "page_pss_mib": [kib / 1024 for kib in page_pss],
        "server_pss_mib": (server_pss / 1024, server_pss_loaded / 1024),
        "stop_s": stop_s,
        "exit": code,
        "left": left,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(
        f"# specmon web demo, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores, load {load:.1f}, {args.rounds} rounds of {args.pages} pages"
    )
    firsts: list[float] = []
    pages_pss: list[float] = []
    stops: list[float] = []
    for n in range(args.rounds):
        r = asyncio.run(round_(args.pages))
        print(f"round {n + 1}: {r}")
        firsts += r["first_frame_s"]  # type: ignore[arg-type]
        pages_pss += r["page_pss_mib"]  # type: ignore[arg-type]
        stops.append(r["stop_s"])  # type: ignore[arg-type]
        assert r["exit"] == 130 and not r["left"], r
    print(
        f"first frame (connect to SIMULATED): median {statistics.median(firsts):.2f} s, "
        f"max {max(firsts):.2f} s over {len(firsts)} pages"
    )
    print(
        f"one page's app group PSS: median {statistics.median(pages_pss):.0f} MiB, "
        f"max {max(pages_pss):.0f} MiB"
    )
    print(
        f"Ctrl-C to exit with {args.pages} pages open: median {statistics.median(stops):.2f} s, "
        f"max {max(stops):.2f} s; no app process left"
    )


if __name__ == "__main__":
    main()
