"""`specmon chat`'s lag and CPU at a REAL server's streaming rate (not the simulator's).

The chat runs headless (Textual's run_test, 120x40) against an attached server, with the GPU
sampled locally; one prompt per round, `ignore_eos`, --max-tokens tokens. Lag = time the frame
that shows a chunk was painted - the chunk's arrival (hub clock); CPU = the CPU seconds of this
process (UI, all threads) and of the session's collector process (stream client, GPU sampler) from
the send to the last chunk painted, as in benchmarks/chat_render.py, whose measuring code this
reuses (the session opened as `specmon chat --attach` opens it). After the last round an SVG
screenshot of the chat is saved (--svg).

Pin this process with `taskset -c 0,1` to measure it on 2 cores (the goal's machine).

Usage: python benchmarks/gpu_vllm/chat_lag.py --url http://127.0.0.1:8000 [--max-tokens 6000]
       [--rounds 3] [--svg FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chat_render import (
    GIVE_UP_S,
    SIZE,
    Result,
    chat_session,
    header,
    machine,
    measure_chat,
    row,
)
from specmon.ui.app import SpecmonApp


async def one_round(
    url: str, max_tokens: int, svg: Path | None, temperature: float | None
) -> Result:
    def look(app: SpecmonApp, shown: str, received: str) -> None:
        if shown != received:  # keep both for a look; the timing stands either way
            print(f"TEXT DIFFERS: shown {len(shown)} chars, received {len(received)}")
            base = Path(os.environ.get("CHAT_LAG_DUMP", "/tmp"))
            (base / "chat-shown.txt").write_text(shown, encoding="utf-8", errors="replace")
            (base / "chat-received.txt").write_text(received, encoding="utf-8", errors="replace")
        if svg is not None:
            app.save_screenshot(filename=svg.name, path=str(svg.parent))

    return await measure_chat(
        chat_session(url, gpu="local"),
        max_tokens,
        temperature=temperature,
        settle_s=1.2,  # a GPU sample or two before the answer
        give_up_after_s=max_tokens / 500 + GIVE_UP_S,
        on_done=look,
        mode="specmon chat (attached)",
    )


async def main_async(args: argparse.Namespace) -> list[Result]:
    results = []
    for i in range(args.rounds):
        last = i == args.rounds - 1
        r = await one_round(args.url, args.max_tokens, args.svg if last else None, args.temperature)
        r.target = r.rate
        results.append(r)
        print(row(r), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--max-tokens", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--svg", type=Path, default=None)
    parser.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (None: server's)"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    lines = [
        f"chat_lag on {machine()}; this process on CPUs {cpus}; {args.url}; "
        f"{args.max_tokens} tokens per answer, temperature {args.temperature}, "
        f"headless Textual {SIZE}",
        "",
        header(),
    ]
    print("\n".join(lines), flush=True)
    results = asyncio.run(main_async(args))
    text = "\n".join([*lines, *(row(r) for r in results), ""])
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
