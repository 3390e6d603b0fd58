"""How many streamed tokens per second one simulated server process serves at unlimited speed.

The server runs in its own process (`specmon sim --speed inf`); clients stream from this process
(threads, httpx). We report tokens/s of wall time, the server's CPU seconds (from /proc), and
tokens per server CPU-second — the number that says whether the simulator could be the bottleneck
when the client is measured. Prints a Markdown table; `--out FILE` also writes it.

Usage: python benchmarks/sim_throughput.py [--requests 40] [--max-tokens 1024] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import threading
import time

import httpx


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


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


def start_server(profile: str, n_spec: int | None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "specmon", "sim", "--port", "0", "--speed", "inf"]
    cmd += ["--log-interval", "0", "--profile", profile]
    if n_spec is not None:
        cmd += ["--n-spec", str(n_spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next(word for word in line.split() if word.startswith("http://"))
    return proc, url


def stream_one(client: httpx.Client, max_tokens: int, continuous: bool) -> int:
    body = {
        "messages": [{"role": "user", "content": "Tell me about speculative decoding."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": continuous},
    }
    tokens = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith('data: {"id"') and '"choices":[]' in line:
                tokens = int(line.rsplit('"completion_tokens":', 1)[1].split("}", 1)[0])
    return tokens


def run_case(
    profile: str,
    n_spec: int | None,
    concurrency: int,
    requests: int,
    max_tokens: int,
    continuous: bool,
) -> dict:
    proc, url = start_server(profile, n_spec)
    try:
        with httpx.Client(base_url=url, timeout=60) as warm:
            stream_one(warm, 64, continuous)
        total = [0]
        lock = threading.Lock()
        per_worker = requests // concurrency

        def worker() -> None:
            with httpx.Client(base_url=url, timeout=120) as client:
                for _ in range(per_worker):
                    n = stream_one(client, max_tokens, continuous)
                    with lock:
                        total[0] += n

        cpu0 = cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "case": f"{profile} n={'default' if n_spec is None else n_spec} c={concurrency}"
        + (" continuous" if continuous else ""),
        "tokens": total[0],
        "wall": wall,
        "cpu": cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cases = [
        ("gemma4-26b-rtx5090m", None, 1, False),
        ("gemma4-26b-rtx5090m", None, 1, True),
        ("gemma4-26b-rtx5090m", None, 4, True),
        ("gemma4-26b-rtx5090m", 0, 1, True),
    ]
    rows = [
        run_case(profile, n, c, args.requests, args.max_tokens, cont)
        for profile, n, c, cont in cases
    ]
    lines = [
        f"Date: {datetime.date.today().isoformat()}; machine: {machine()}",
        f"{args.requests} requests x {args.max_tokens} tokens per case, server --speed inf",
        "",
        "| case | tokens | wall s | tok/s (wall) | server CPU s | tok/s per server CPU-s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['tokens']} | {r['wall']:.2f} | {r['tokens'] / r['wall']:,.0f} "
            f"| {r['cpu']:.2f} | {r['tokens'] / max(r['cpu'], 1e-9):,.0f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
