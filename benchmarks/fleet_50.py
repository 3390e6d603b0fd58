"""CPU cost of one refresh of a 50-server fleet: through a Prometheus vs 50 direct scrapes.

Setup:
- 50 simulated vLLM servers (`specmon.sim`) in a CHILD process (so their work is not counted),
  each having served a few requests (so every spec-decode series has values);
- a real Prometheus (the Debian package, as in tests/fleet) in its own process, scraping the 50
  every `--scrape-interval` seconds (default 5 s), plus itself;
- in THIS process, the way `specmon watch` runs them (one asyncio loop, one SessionState):
  A. fleet: `PrometheusFleet.read_once` (targets list + one tagged instant query + the dcgm
     query; the periodic range read is measured on its own) folded into the state, view rebuilt;
  B. direct: 50 `MetricsScraper.scrape_once` in parallel (`watch --attach` x 50), each page
     parsed and folded, view rebuilt.
Each refresh is timed with `time.process_time()` (CPU of every thread of this process) and
wall time; the table gives medians over `--rounds` refreshes of each kind, interleaved.

Run:  PYTHONPATH=src python benchmarks/fleet_50.py [--targets 50] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.prometheus import Prometheus, find_or_install_prometheus  # noqa: E402

from specmon.core.events import SessionInfo  # noqa: E402
from specmon.core.session_state import SessionState  # noqa: E402
from specmon.sources.metrics_scraper import MetricsScraper  # noqa: E402
from specmon.sources.prometheus_fleet import PrometheusFleet  # noqa: E402

CHILD = r"""
import json, sys, threading, httpx
from specmon.sim.server import SimConfig, start_in_thread
n = int(sys.argv[1])
sims = [start_in_thread(SimConfig(speed=50.0, n_spec=4 + i % 5, seed=i), log_sink=lambda _l: None)
        for i in range(n)]
model = httpx.get(sims[0].url + "/v1/models").json()["data"][0]["id"]
def warm(s):
    for k in range(2):
        httpx.post(s.url + "/v1/chat/completions", timeout=60, json={
            "model": model, "messages": [{"role": "user", "content": f"q{k}"}], "max_tokens": 32})
threads = [threading.Thread(target=warm, args=(s,)) for s in sims]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps([s.url for s in sims]), flush=True)
sys.stdin.read()
"""


def cpu_of(pid: int) -> float:
    """utime + stime of a process, seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(urls: list[str], prom: Prometheus, rounds: int) -> dict[str, list[float]]:
    fleet = PrometheusFleet(prom.url, rate_window_s=30.0, history_every_s=1e9)
    fleet_state = SessionState(SessionInfo())
    scrapers = [MetricsScraper(u + "/metrics", source=u) for u in urls]
    direct_state = SessionState(SessionInfo())
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "fleet_cpu",
            "fleet_wall",
            "direct_cpu",
            "direct_wall",
            "prom_cpu",
            "range_cpu",
            "range_wall",
        )
    }
    # Warm both paths (connections opened, first history read done, caches filled).
    await fleet.read_once(fleet_state.apply)
    await asyncio.gather(*(s.scrape_once(direct_state.apply) for s in scrapers))
    for _ in range(rounds):
        p0, c0, w0 = cpu_of(prom.proc.pid), time.process_time(), time.perf_counter()  # type: ignore[union-attr]
        event = await fleet.read_once(fleet_state.apply)
        fleet_state.publish()
        c1, w1, p1 = time.process_time(), time.perf_counter(), cpu_of(prom.proc.pid)  # type: ignore[union-attr]
        assert event.error is None and len(event.targets) == len(urls), event.error
        out["fleet_cpu"].append(c1 - c0)
        out["fleet_wall"].append(w1 - w0)
        out["prom_cpu"].append(p1 - p0)
        c0, w0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(s.scrape_once(direct_state.apply) for s in scrapers))
        direct_state.publish()
        c1, w1 = time.process_time(), time.perf_counter()
        out["direct_cpu"].append(c1 - c0)
        out["direct_wall"].append(w1 - w0)
        await asyncio.sleep(0.3)
    # The Prometheus holds well under an hour here: ask for 240 steps over what it has, which is
    # the size of an hour's answer at the default step (3600 s / 240 = 15 s).
    fleet.history_s = 30.0
    fleet.history_step_s = 30.0 / 240
    for _ in range(3):
        c0, w0 = time.process_time(), time.perf_counter()
        history = await fleet._history()
        c1, w1 = time.process_time(), time.perf_counter()
        assert len(history) == len(urls) and all(len(h.ago_s) >= 240 for h in history)
        out["range_cpu"].append(c1 - c0)
        out["range_wall"].append(w1 - w0)
    assert len(fleet_state.view().servers) == len(urls) == len(direct_state.view().servers)
    await fleet.aclose()
    for s in scrapers:
        await s.aclose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--scrape-interval", type=float, default=5.0)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(args.targets)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    prom: Prometheus | None = None
    try:
        assert child.stdout is not None
        urls = json.loads(child.stdout.readline())
        work = Path(tempfile.mkdtemp(prefix="specmon-fleet50-"))
        prom = Prometheus(
            find_or_install_prometheus(),
            work,
            {"vllm": [u.split("//", 1)[1] for u in urls]},
            scrape_interval_s=args.scrape_interval,
        )
        prom.start()
        prom.wait_for_scrapes('up{job="vllm"} == 1', len(urls), timeout=120)
        time.sleep(2 * args.scrape_interval + 1)  # two samples of every series: rates exist
        r = asyncio.run(measure(urls, prom, args.rounds))
    finally:
        if prom is not None:
            prom.stop()
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)

    def med(key: str) -> float:
        return statistics.median(r[key]) * 1000

    n = args.targets
    print(
        f"# fleet_50 {time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {n} targets, "
        f"{args.rounds} rounds, Prometheus scrape interval {args.scrape_interval:g} s"
    )
    print()
    print("| one refresh of all targets | CPU (this process), median | per target | wall, median |")
    print("|---|---:|---:|---:|")
    print(
        f"| through the Prometheus (targets + 1 instant query + dcgm query) | "
        f"{med('fleet_cpu'):.1f} ms | {med('fleet_cpu') / n:.2f} ms | {med('fleet_wall'):.1f} ms |"
    )
    print(
        f"| {n} direct /metrics scrapes | {med('direct_cpu'):.1f} ms | "
        f"{med('direct_cpu') / n:.2f} ms | {med('direct_wall'):.1f} ms |"
    )
    print(
        f"| range read (history: 240 steps x 5 series, all targets; every 5 min) | "
        f"{med('range_cpu'):.1f} ms | {med('range_cpu') / n:.2f} ms | {med('range_wall'):.1f} ms |"
    )
    print()
    print(
        f"ratio fleet / direct CPU: {med('fleet_cpu') / med('direct_cpu'):.3f}; "
        f"the Prometheus's own CPU per fleet refresh (median): {med('prom_cpu'):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
