"""Cost of one `NvmlSampler.sample()`, per field group, against a bare pynvml loop of the same calls

For each field group (and for all of them together) the sampler reads every GPU with only that
group enabled; the bare loop makes exactly the NVML calls the sampler makes for it (static fields
are cached by the sampler after the first sample, so the bare loop does not repeat them either).
The ratio sampler/bare is the price of the one-error-path wrapper, decoding and event building.

Runs on the real driver when NVML initialises, else on the fake NVML (`--fake` forces it); the
output says which. Timings are medians of interleaved rounds, reported as ratios inside one run.

    python benchmarks/gpu_sample_cost.py [--fake] [--samples 2000] [--rounds 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import specmon  # noqa: F401
except ImportError:  # running from a plain checkout (e.g. on a GPU box without an install)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from specmon.sources.gpu.nvml import FIELD_GROUPS, NvmlSampler


def pick_nvml(force_fake: bool) -> tuple[Any, str]:
    """The real pynvml when it initialises (and not forced off), else the fake."""
    if not force_fake:
        try:
            import pynvml

            pynvml.nvmlInit()
            pynvml.nvmlShutdown()
            return pynvml, "real NVML"
        except Exception as exc:
            print(f"(real NVML unavailable: {exc}; using the fake NVML)", file=sys.stderr)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fake NVML
    from tests.support.fake_nvml import FakeGpu, FakeNvml

    return FakeNvml([FakeGpu()]), "FAKE NVML (no driver calls; measures specmon's own overhead)"


def bare_calls(
    nvml: Any, handles: list[Any], group: str, memory_v2: bool, reasons: str
) -> Callable:
    """A function making the NVML calls `group` needs for every handle, with no wrapping."""
    temp, sm, mem = nvml.NVML_TEMPERATURE_GPU, nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    version = getattr(nvml, "nvmlMemory_v2", None) if memory_v2 else None

    def temperature() -> None:
        for h in handles:
            nvml.nvmlDeviceGetTemperature(h, temp)

    def memory() -> None:
        for h in handles:
            if version:
                nvml.nvmlDeviceGetMemoryInfo(h, version=version)
            else:
                nvml.nvmlDeviceGetMemoryInfo(h)

    def utilization() -> None:
        for h in handles:
            nvml.nvmlDeviceGetUtilizationRates(h)

    def power() -> None:
        for h in handles:
            nvml.nvmlDeviceGetPowerUsage(h)

    def clocks() -> None:
        for h in handles:
            nvml.nvmlDeviceGetClockInfo(h, sm)
            nvml.nvmlDeviceGetClockInfo(h, mem)

    reasons_fn = getattr(nvml, reasons)

    def clock_reasons() -> None:
        for h in handles:
            reasons_fn(h)

    parts = {
        "temperature": temperature,
        "memory": memory,
        "utilization": utilization,
        "power": power,
        "clocks": clocks,
        "reasons": clock_reasons,
    }
    if group == "all":
        chosen = [parts[g] for g in FIELD_GROUPS]

        def everything() -> None:
            for part in chosen:
                part()

        return everything
    return parts[group]


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n / 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="use the fake NVML")
    parser.add_argument("--samples", type=int, default=2000, help="samples per timing")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)

    nvml, which = pick_nvml(args.fake)
    probe = NvmlSampler(nvml=nvml)
    first = probe.sample(0.0)
    if first.error is not None:
        print(f"cannot benchmark: {first.error}", file=sys.stderr)
        return 1
    memory_v2 = bool(probe.memory_info_v2)
    reasons = probe.reasons_function or "nvmlDeviceGetCurrentClocksEventReasons"
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(len(first.gpus))]
    gpu_names = sorted({g.name or "?" for g in first.gpus})

    rows = []
    for group in (*FIELD_GROUPS, "all"):
        sampler = NvmlSampler(nvml=nvml, groups=FIELD_GROUPS if group == "all" else (group,))
        sampler.sample(0.0)  # init + static fields cached, as in steady state
        bare = bare_calls(nvml, handles, group, memory_v2, reasons)
        now = [0.0]

        def one_sample(sampler: NvmlSampler = sampler, now: list[float] = now) -> None:
            now[0] += 1.0
            sampler.sample(now[0])

        wrapped_us, bare_us = [], []
        for _ in range(args.rounds):
            wrapped_us.append(per_call_us(one_sample, args.samples))
            bare_us.append(per_call_us(bare, args.samples))
        sampler.close()
        w, b = statistics.median(wrapped_us), statistics.median(bare_us)
        rows.append((group, w, b, w / b if b > 0 else float("nan")))
    probe.close()

    lines = [
        f"GPU sample cost — {which}",
        f"date: {datetime.date.today().isoformat()}   machine: {platform.machine()} "
        f"{platform.processor() or ''}  python {platform.python_version()}",
        f"GPUs: {len(handles)} x {', '.join(gpu_names)}   memory info: "
        f"{'v2' if memory_v2 else 'v1'}   reasons: {reasons}",
        f"{args.samples} samples per timing, median of {args.rounds} interleaved rounds",
        "",
        "| field group | sample() µs | bare pynvml µs | ratio |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {g} | {w:.2f} | {b:.2f} | {r:.2f}x |" for g, w, b, r in rows]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
