"""specmon's NVML readings against nvidia-smi on a real GPU, idle and under load.

Run on a machine with an NVIDIA GPU (the project's CPU machines have none):

    PYTHONPATH=src python3 benchmarks/gpu_readings_check.py [--seconds 20] [--out DIR]

For `--seconds` it samples the GPU twice a second with specmon's `NvmlSampler` and, at the same
moment, with `nvidia-smi --query-gpu=…` (a separate reader of the same driver), first idle and then
while a matrix-multiply loop (PyTorch, when installed) keeps the GPU busy. It prints one table row
per pair and the largest difference per field, and writes `gpu_pairs.csv`. With `--out` it also
renders the app's watch dashboard against the built-in simulator with the local GPU
(`dashboard_gpu.svg`), the panel a user sees.

Readings are instantaneous and the two readers cannot sample at the same microsecond, so
temperature may differ by a degree and power and clocks by what changes between the two reads;
memory total and the power limit must be equal.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

FIELDS = ("temperature.gpu", "power.draw", "clocks.sm", "clocks.mem", "memory.used", "memory.total")
MIB = 1024 * 1024


def smi_row(index: int) -> dict[str, float | None]:
    out = subprocess.run(
        [
            "nvidia-smi",
            f"--query-gpu={','.join(FIELDS)}",
            "--format=csv,noheader,nounits",
            f"--id={index}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    values: dict[str, float | None] = {}
    for name, cell in zip(FIELDS, out.split(","), strict=True):
        try:
            values[name] = float(cell)
        except ValueError:
            values[name] = None
    return values


def load(stop: threading.Event) -> str:
    try:
        import torch
    except ImportError:
        return "no torch: idle only"
    if not torch.cuda.is_available():
        return "torch sees no GPU: idle only"
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def spin() -> None:
        while not stop.is_set():
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()

    threading.Thread(target=spin, daemon=True).start()
    return "bf16 8192³ matmul loop"


def pairs(seconds: float, phase: str) -> list[dict[str, object]]:
    from specmon.sources.gpu import NvmlSampler

    sampler = NvmlSampler()
    rows: list[dict[str, object]] = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            event = sampler.sample(time.monotonic())
            if event.error is not None or not event.gpus:
                raise SystemExit(f"specmon's sampler: {event.error or 'no GPU'}")
            gpu = event.gpus[0]
            smi = smi_row(gpu.index)
            rows.append(
                {
                    "phase": phase,
                    "temp_specmon": gpu.temperature_c,
                    "temp_smi": smi["temperature.gpu"],
                    "power_specmon": gpu.power_w,
                    "power_smi": smi["power.draw"],
                    "sm_specmon": gpu.sm_clock_mhz,
                    "sm_smi": smi["clocks.sm"],
                    "mem_clock_specmon": gpu.memory_clock_mhz,
                    "mem_clock_smi": smi["clocks.mem"],
                    "used_mib_specmon": None
                    if gpu.memory_used_bytes is None
                    else round(gpu.memory_used_bytes / MIB),
                    "used_mib_smi": smi["memory.used"],
                    "total_mib_specmon": None
                    if gpu.memory_total_bytes is None
                    else round(gpu.memory_total_bytes / MIB),
                    "total_mib_smi": smi["memory.total"],
                    "reasons": ",".join(gpu.clock_event_reasons or ()),
                    "name": gpu.name,
                }
            )
            time.sleep(0.5)
    finally:
        sampler.close()
    return rows


def render_dashboard(path: Path) -> None:
    """The watch dashboard with the local GPU, against the simulator, as an SVG."""
    from specmon.core.session_state import SessionState
    from specmon.runtime.monitor import Target
    from specmon.runtime.session import CollectorProcess, SessionConfig
    from specmon.sim.server import SimConfig, start_in_thread
    from specmon.ui.app import SpecmonApp
    from specmon.ui.live_port import LivePort

    with start_in_thread(SimConfig(speed=5.0, seed=1), log_sink=lambda _l: None) as sim:
        config = SessionConfig((Target(sim.url),), gpu="local", interval=0.5, quiet=True)
        port = LivePort(lambda: CollectorProcess(config, SessionState), require_model=False)
        app = SpecmonApp(port, mode="watch")
        busy = threading.Event()

        def traffic() -> None:  # some answers, so the panel's speed and acceptance fill in
            import httpx

            model = httpx.get(f"{sim.url}/v1/models").json()["data"][0]["id"]
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            while not busy.is_set():
                try:
                    httpx.post(f"{sim.url}/v1/chat/completions", json=body | {"max_tokens": 96})
                except httpx.HTTPError:  # the simulator stopping at the end
                    return

        threading.Thread(target=traffic, daemon=True).start()

        async def shoot() -> None:
            async with app.run_test(size=(150, 42)) as pilot:
                await pilot.pause(12.0)
                app.save_screenshot(str(path))

        try:
            asyncio.run(shoot())
        finally:
            busy.set()
            port.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per phase (idle, load)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSV and the SVG")
    args = parser.parse_args()
    if shutil.which("nvidia-smi") is None:
        print("nvidia-smi not found: run this on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    out = args.out or Path(".")
    out.mkdir(parents=True, exist_ok=True)
    rows = pairs(args.seconds, "idle")
    stop = threading.Event()
    what = load(stop)
    print(f"load: {what}")
    time.sleep(2.0)
    rows += pairs(args.seconds, "load")
    if args.out is not None:
        render_dashboard(out / "dashboard_gpu.svg")
    stop.set()
    with (out / "gpu_pairs.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"GPU: {rows[0]['name']}; {len(rows)} pairs")
    names = ("temp", "power", "sm", "mem_clock", "used_mib", "total_mib")
    print("phase | " + " | ".join(f"{n} specmon/smi" for n in names))
    for row in rows:
        cells = [f"{row[f'{n}_specmon']}/{row[f'{n}_smi']}" for n in names]
        print(f"{row['phase']} | " + " | ".join(cells) + f" | {row['reasons']}")
    for phase in ("idle", "load"):
        sel = [r for r in rows if r["phase"] == phase]
        diffs = []
        for n in names:
            d = [
                abs(float(r[f"{n}_specmon"]) - float(r[f"{n}_smi"]))  # type: ignore[arg-type]
                for r in sel
                if r[f"{n}_specmon"] is not None and r[f"{n}_smi"] is not None
            ]
            diffs.append(f"{n} max |Δ| {max(d):.1f}" if d else f"{n} —")
        print(f"{phase}: " + "; ".join(diffs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
