"""Filtered /metrics parse (core.metrics_page.parse_metrics_page) vs a full prometheus_client parse
of the same page (parse_metrics_page_full), in the same run. Target: at most a fifth of the time.

Pages: the golden captures of a real vLLM server (tests/golden/metrics/*-after.txt) and generated
vLLM-shaped pages with 1 and 4 engines (tests/support/metrics_page_fixtures.py). Interleaved rounds,
median per page. Prints a Markdown table.

    python benchmarks/metrics_parse.py [--rounds 21] [--number 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.metrics_page_fixtures import vllm_page  # noqa: E402

from specmon.core.metrics_page import parse_metrics_page, parse_metrics_page_full  # noqa: E402


def pages() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "tests" / "golden" / "metrics").glob("*-after.txt")):
        out.append((f"golden {path.stem}", path.read_text(encoding="utf-8")))
    out.append(("generated, 1 engine, K=8", vllm_page(seed=1, n_spec=8)))
    out.append(
        ("generated, 4 engines, K=8", vllm_page(seed=2, n_spec=8, engines=("0", "1", "2", "3")))
    )
    return out


def per_call(fn: Callable[[str], object], text: str, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(text)
    return (time.perf_counter() - start) / number


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--number", type=int, default=50)
    args = ap.parse_args()
    cpu = platform.processor() or platform.machine()
    print(f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} CPUs, ", end="")
    print(f"Python {platform.python_version()}, medians of {args.rounds} rounds x {args.number}")
    print()
    print("| page | lines | samples kept | filtered µs | full µs | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, text in pages():
        assert parse_metrics_page(text) == parse_metrics_page_full(text)
        filtered, full = [], []
        for _ in range(args.rounds):
            filtered.append(per_call(parse_metrics_page, text, args.number))
            full.append(per_call(parse_metrics_page_full, text, args.number))
        f, g = statistics.median(filtered), statistics.median(full)
        worst = max(worst, f / g)
        kept = len(parse_metrics_page(text))
        lines = text.count("\n")
        print(f"| {name} | {lines} | {kept} | {f * 1e6:.0f} | {g * 1e6:.0f} | {f / g:.3f} |")
    print()
    print(f"worst ratio {worst:.3f} (target <= 0.200): {'met' if worst <= 0.2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
