"""Proof that specmon's NVML sampler reads a real NVIDIA GPU right.

Three phases on one GPU, read through `NvmlSampler` once a second:
1. idle: a few samples before any CUDA work;
2. load: bf16 matrix products (torch) for `--load-seconds`; temperature and power must rise and
   utilisation must be high;
3. memory: a tensor of exactly `--alloc-gib` GiB is allocated; VRAM used must grow by that amount
   (±2%) and fall back when it is freed.
Readings are also compared with nvidia-smi (its own code path to the same driver), taken next to a
sampler reading. Prints a table and PASS/FAIL per check; writes the output to `$OUT` (or --out).

`--fake` runs the same script on the fake NVML with a scripted "load", to test the script itself on
a machine without a GPU; its output says FAKE and proves nothing about hardware.

    python benchmarks/gpu_proof.py [--load-seconds 60] [--alloc-gib 8] [--out DIR] [--fake]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import specmon  # noqa: F401
except ImportError:  # a plain checkout on a GPU box, without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specmon.core.events import GpuReading
from specmon.sources.gpu.nvml import NvmlSampler

GIB = 1024**3
MIB = 1024**2


# ---------------------------------------------------------------- workloads


class TorchWorkload:
    """The real load: bf16 matmuls on one CUDA device, and a plain allocation of N bytes."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.device = torch.device("cuda", 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held: Any = None
        self.tflops: float | None = None

    def cuda_uuid(self) -> str | None:
        props = self.torch.cuda.get_device_properties(self.device)
        uuid = getattr(props, "uuid", None)
        return None if uuid is None else f"GPU-{uuid}"

    def start_load(self) -> None:
        torch = self.torch

        def spin() -> None:
            n = 8192
            a = torch.randn(n, n, device=self.device, dtype=torch.bfloat16)
            b = torch.randn(n, n, device=self.device, dtype=torch.bfloat16)
            done, start = 0, time.perf_counter()
            while not self._stop.is_set():
                for _ in range(20):
                    c = a @ b
                torch.cuda.synchronize(self.device)
                done += 20
            seconds = time.perf_counter() - start
            self.tflops = 2 * n**3 * done / seconds / 1e12
            del a, b, c

        self._thread = threading.Thread(target=spin, name="matmul-load", daemon=True)
        self._thread.start()

    def stop_load(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.empty_cache()

    def allocate(self, nbytes: int) -> None:
        torch = self.torch
        # zeros() writes every byte, so the memory is certainly backed, not merely reserved
        self._held = torch.zeros(nbytes, dtype=torch.uint8, device=self.device)
        torch.cuda.synchronize(self.device)

    def free(self) -> None:
        self._held = None
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.empty_cache()


class FakeWorkload:
    """A scripted load on the fake NVML: heats up, draws power, and 'allocates' memory."""

    def __init__(self, fake: Any) -> None:
        self.gpu = fake.gpus[0]
        self.tflops: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def cuda_uuid(self) -> str | None:
        return str(self.gpu.uuid)

    def start_load(self) -> None:
        def heat() -> None:
            self.gpu.utilization_pct, self.gpu.sm_clock_mhz = 100, 1980
            self.gpu.clock_event_reasons = 0x4
            while not self._stop.wait(0.2):
                self.gpu.temperature_c = min(self.gpu.temperature_c + 1, 80)
                self.gpu.power_mw = min(self.gpu.power_mw + 60_000, 690_000)

        self._thread = threading.Thread(target=heat, daemon=True)
        self._thread.start()

    def stop_load(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.gpu.utilization_pct, self.gpu.power_mw, self.gpu.sm_clock_mhz = 0, 90_000, 345
        self.gpu.clock_event_reasons = 0x1

    def allocate(self, nbytes: int) -> None:
        self.gpu.memory_used_bytes += nbytes

    def free(self) -> None:
        self.gpu.memory_used_bytes = 1 * GIB


# ---------------------------------------------------------------- sampling


@dataclass
class Trace:
    """Readings of one GPU, tagged by phase."""

    rows: list[tuple[str, float, GpuReading]] = field(default_factory=list)

    def of(self, phase: str) -> list[GpuReading]:
        return [r for p, _, r in self.rows if p == phase]


class Recorder:
    """Samples the sampler once a second in a thread, keeping the chosen GPU's readings."""

    def __init__(self, sampler: NvmlSampler, index: int, start: float) -> None:
        self.sampler, self.index, self.start = sampler, index, start
        self.trace = Trace()
        self.phase = "idle"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def take(self) -> GpuReading:
        now = time.monotonic()
        event = self.sampler.sample(now)
        if event.error is not None:
            raise RuntimeError(event.error)
        reading = event.gpus[self.index]
        self.trace.rows.append((self.phase, now - self.start, reading))
        return reading

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.take()

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def median_used(recorder: Recorder, n: int = 3) -> int:
    """Median VRAM used over n readings a little apart (NVML memory info is instantaneous)."""
    values = []
    for _ in range(n):
        reading = recorder.take()
        assert reading.memory_used_bytes is not None
        values.append(reading.memory_used_bytes)
        time.sleep(0.2)
    return int(statistics.median(values))


def nvidia_smi(index: int) -> dict[str, str] | None:
    """nvidia-smi's view of one GPU, or None where there is no nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    keys = [
        "name",
        "uuid",
        "temperature.gpu",
        "power.draw",
        "enforced.power.limit",
        "memory.used",
        "memory.total",
        "utilization.gpu",
        "clocks.sm",
        "clocks.mem",
        "driver_version",
    ]
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                f"--id={index}",
                f"--query-gpu={','.join(keys)}",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc)}
    return dict(zip(keys, (c.strip() for c in out.strip().split(",")), strict=False))


# ---------------------------------------------------------------- output


def fmt(value: float | None, spec: str = ".0f") -> str:
    return "—" if value is None else format(value, spec)


def mib(nbytes: int | None) -> float | None:
    return None if nbytes is None else nbytes / MIB


def table(trace: Trace) -> list[str]:
    lines = [
        "| phase | t s | temp °C | power W | util % | SM MHz | mem MHz | VRAM used MiB | reasons |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for phase, t, r in trace.rows:
        used = mib(r.memory_used_bytes)
        reasons = (
            "—" if r.clock_event_reasons is None else (",".join(r.clock_event_reasons) or "none")
        )
        lines.append(
            f"| {phase} | {t:.1f} | {fmt(r.temperature_c)} | {fmt(r.power_w, '.1f')} | "
            f"{fmt(r.utilization_pct)} | {fmt(r.sm_clock_mhz)} | {fmt(r.memory_clock_mhz)} | "
            f"{fmt(used)} | {reasons} |"
        )
    return lines


class Checks:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str) -> None:
        self.failed += not ok
        self.lines.append(f"{'PASS' if ok else 'FAIL'}  {what}: {detail}")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--alloc-gib", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--fake", action="store_true", help="fake NVML + scripted load (no GPU)")
    args = parser.parse_args(argv)

    out: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.append(line)

    if args.fake:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fake NVML
        from tests.support.fake_nvml import FakeGpu, FakeNvml

        fake = FakeNvml([FakeGpu(memory_used_bytes=1 * GIB)])
        sampler = NvmlSampler(nvml=fake)
        workload: Any = FakeWorkload(fake)
        say("FAKE NVML run: this checks the script, it proves nothing about a GPU.")
    else:
        sampler = NvmlSampler()
        workload = None

    start = time.monotonic()
    first = sampler.sample(start)
    if first.error is not None:
        say(f"FAIL  no GPU readings: {first.error}")
        write(args.out, out)
        return 1

    # Phase 1: idle, before this process touches CUDA.
    idle_smi = None if args.fake else nvidia_smi(0)
    recorder = Recorder(sampler, 0, start)
    for _ in range(max(1, round(args.idle_seconds))):
        recorder.take()
        time.sleep(1.0)
    if workload is None:
        workload = TorchWorkload()
    uuid = workload.cuda_uuid()
    index = next((g.index for g in first.gpus if uuid and g.uuid == uuid), 0)
    if index != 0:  # rebase the idle readings on the GPU CUDA uses
        recorder.trace = Trace()
        recorder.index = index
        for _ in range(3):
            recorder.take()
    gpu0 = first.gpus[index]

    say(f"specmon GPU proof — {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    say(f"GPU {index}: {gpu0.name}  ({gpu0.uuid}); CUDA device 0 uuid {uuid}")
    say(f"host: {platform.machine()}, python {platform.python_version()}")
    if idle_smi:
        say(f"driver (nvidia-smi): {idle_smi.get('driver_version')}")
    say(
        f"static: slowdown {fmt(gpu0.slowdown_temperature_c)} °C, "
        f"power limit {fmt(gpu0.power_limit_w, '.0f')} W, "
        f"VRAM total {fmt(mib(gpu0.memory_total_bytes))} MiB"
    )

    # Phase 2: load.
    with recorder:
        recorder.phase = "load"
        workload.start_load()
        time.sleep(args.load_seconds)
        # next to a sampler reading, nvidia-smi's view while the load still runs
        smi_reading = recorder.take()
        load_smi = None if args.fake else nvidia_smi(index)
        workload.stop_load()
        recorder.phase = "cool"
    recorder.take()

    # Phase 3: memory.
    recorder.phase = "memory"
    alloc = int(args.alloc_gib * GIB)
    before = median_used(recorder)
    workload.allocate(alloc)
    time.sleep(0.5)
    during = median_used(recorder)
    workload.free()
    time.sleep(0.5)
    after = median_used(recorder)
    sampler.close()

    say()
    say(f"readings of GPU {index} through specmon's NvmlSampler (1 Hz):")
    for line in table(recorder.trace):
        say(line)

    idle = recorder.trace.of("idle")
    load = recorder.trace.of("load")
    steady = load[len(load) // 4 :] or load  # skip the ramp-up

    def values(readings: list[GpuReading], name: str) -> list[float]:
        return [getattr(r, name) for r in readings if getattr(r, name) is not None]

    idle_temp = statistics.median(values(idle, "temperature_c") or [float("nan")])
    idle_power = statistics.median(values(idle, "power_w") or [float("nan")])
    peak_temp = max(values(load, "temperature_c") or [float("nan")])
    peak_power = max(values(load, "power_w") or [float("nan")])
    mean_power = statistics.fmean(values(steady, "power_w") or [float("nan")])
    util = statistics.median(values(steady, "utilization_pct") or [float("nan")])
    reasons_seen = sorted({w for r in load for w in (r.clock_event_reasons or ())})

    checks = Checks()
    missing = [
        name
        for name in (
            "name",
            "uuid",
            "temperature_c",
            "slowdown_temperature_c",
            "memory_used_bytes",
            "memory_total_bytes",
            "utilization_pct",
            "power_w",
            "power_limit_w",
            "sm_clock_mhz",
            "memory_clock_mhz",
            "clock_event_reasons",
        )
        if getattr(steady[-1], name) is None
    ]
    checks.check(
        not missing, "every field read", "none shows —" if not missing else f"— in {missing}"
    )
    checks.check(
        peak_temp - idle_temp >= 3.0,
        "temperature rises under load",
        f"idle {idle_temp:.0f} °C -> peak {peak_temp:.0f} °C "
        f"(+{peak_temp - idle_temp:.0f}; need ≥ +3)",
    )
    checks.check(
        peak_power - idle_power >= 100.0,
        "power rises under load",
        f"idle {idle_power:.0f} W -> mean {mean_power:.0f} W, peak {peak_power:.0f} W "
        f"(+{peak_power - idle_power:.0f}; need ≥ +100)",
    )
    checks.check(util >= 90.0, "utilisation under load", f"median {util:.0f}% (need ≥ 90)")
    grew = during - before
    checks.check(
        abs(grew - alloc) <= 0.02 * alloc,
        f"VRAM used grows by the {args.alloc_gib:g} GiB allocated (±2%)",
        f"{before / MIB:.0f} -> {during / MIB:.0f} MiB: +{grew / MIB:.0f} MiB vs "
        f"{alloc / MIB:.0f} MiB ({(grew - alloc) / alloc * 100:+.2f}%)",
    )
    checks.check(
        abs(after - before) <= 0.02 * alloc,
        "VRAM used falls back when freed (±2% of the allocation)",
        f"{during / MIB:.0f} -> {after / MIB:.0f} MiB (before: {before / MIB:.0f} MiB)",
    )
    if load_smi and "error" not in load_smi:
        smi_temp = float(load_smi["temperature.gpu"])
        smi_total = float(load_smi["memory.total"].split()[0])
        checks.check(
            load_smi["name"] == smi_reading.name and load_smi["uuid"] == smi_reading.uuid,
            "name and UUID match nvidia-smi",
            f"{load_smi['name']} / {load_smi['uuid']}",
        )
        checks.check(
            smi_reading.temperature_c is not None
            and abs(smi_temp - smi_reading.temperature_c) <= 2,
            "temperature matches nvidia-smi (±2 °C)",
            f"specmon {fmt(smi_reading.temperature_c)} °C, nvidia-smi {smi_temp:.0f} °C",
        )
        checks.check(
            smi_reading.memory_total_bytes is not None
            and abs(smi_reading.memory_total_bytes / MIB - smi_total) <= 1,
            "VRAM total matches nvidia-smi",
            f"specmon {fmt(mib(smi_reading.memory_total_bytes))} MiB, "
            f"nvidia-smi {smi_total:.0f} MiB",
        )
        say()
        say("nvidia-smi at the end of the load (next to the last load reading above):")
        for key, value in load_smi.items():
            say(f"  {key}: {value}")
        say(
            f"  specmon: temp {fmt(smi_reading.temperature_c)} °C, "
            f"power {fmt(smi_reading.power_w, '.1f')} W, "
            f"used {fmt(mib(smi_reading.memory_used_bytes))} MiB, "
            f"SM {fmt(smi_reading.sm_clock_mhz)} MHz, util {fmt(smi_reading.utilization_pct)}%"
        )
    say()
    say(f"clock-event reasons seen under load: {', '.join(reasons_seen) or 'none'}")
    if workload.tflops is not None:
        say(
            f"load: bf16 8192^3 matmuls at {workload.tflops:.0f} TFLOP/s "
            f"for {args.load_seconds:g} s"
        )
    say()
    for line in checks.lines:
        say(line)
    say(f"{'ALL PASS' if not checks.failed else f'{checks.failed} FAILED'}")
    write(args.out, out)
    return 0 if not checks.failed else 1


def write(directory: Path, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gpu_proof.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
