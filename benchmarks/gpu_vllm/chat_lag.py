"""`specmon chat`'s lag and CPU at a REAL server's streaming rate (not the simulator's).

The chat runs headless (Textual's run_test, 120x40) against an attached server, with the GPU
sampled locally; one prompt per round, `ignore_eos`, --max-tokens tokens. Lag = time the frame
that shows a chunk was painted - the chunk's arrival (hub clock); CPU = this process's CPU seconds
(stream client + UI, all threads) from the send to the last chunk painted, as in
benchmarks/chat_render.py, whose measuring code this reuses. After the last round an SVG
screenshot of the chat is saved (--svg).

Pin this process with `taskset -c 0,1` to measure it on 2 cores (the goal's machine).

Usage: python benchmarks/gpu_vllm/chat_lag.py --url http://127.0.0.1:8000 [--max-tokens 6000]
       [--rounds 3] [--svg FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chat_render import GIVE_UP_S, PROMPT, SIZE, Result, header, machine, row
from specmon.cli.session_setup import state_factory
from specmon.runtime.monitor import Monitor, Target
from specmon.sources.gpu import NvmlSampler
from specmon.ui.app.app import SpecmonApp
from specmon.ui.app.conversation import ChatSettings
from specmon.ui.app.session_port import SessionPort
from specmon.ui.app.widgets import AnswerView


async def one_round(
    url: str, max_tokens: int, svg: Path | None, temperature: float | None
) -> Result:
    port = SessionPort(lambda: Monitor([Target(url)], state_factory(None), gpu=NvmlSampler()))
    lags: list[float] = []
    done = asyncio.Event()
    feeds = []
    painted = [0]

    def on_frame(arrivals: tuple[float, ...], ended: bool) -> None:
        now = port.now()
        lags.extend(now - t for t in arrivals)
        painted[0] += len(arrivals)
        if ended:
            done.set()

    app = SpecmonApp(
        port,
        settings=ChatSettings(temperature=temperature, max_tokens=max_tokens),
        frame_hook=on_frame,
    )
    ask = port.ask

    def ask_ignoring_eos(request):
        feed = ask(replace(request, extra_body={"ignore_eos": True}))
        feeds.append(feed)
        return feed

    port.ask = ask_ignoring_eos  # type: ignore[method-assign]
    try:
        async with app.run_test(size=SIZE) as pilot:
            while not port.connected:
                await pilot.pause(0.05)
            await pilot.pause(1.2)  # a GPU sample or two before the answer
            screen = app.screen
            cpu0, wall0 = time.process_time(), time.perf_counter()
            screen.send(PROMPT)  # type: ignore[attr-defined]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), max_tokens / 500 + GIVE_UP_S)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            await pilot.pause(1.5)
            view = next(iter(screen.query(AnswerView)))
            sent = "".join(feeds[0].all_text)
            if view.text != sent:  # keep both for a look; the timing stands either way
                print(f"TEXT DIFFERS: shown {len(view.text)} chars, received {len(sent)}")
                base = Path(os.environ.get("CHAT_LAG_DUMP", "/tmp"))
                (base / "chat-shown.txt").write_text(view.text, encoding="utf-8", errors="replace")
                (base / "chat-received.txt").write_text(sent, encoding="utf-8", errors="replace")
            numbers = feeds[0].numbers()
            if svg is not None:
                app.save_screenshot(filename=svg.name, path=str(svg.parent))
    finally:
        port.close()
    return Result(
        "specmon chat (attached)",
        numbers.decode_tok_s or float("nan"),
        numbers.tokens or 0,
        len(lags),
        painted[0],
        lags,
        cpu,
        wall,
        gave_up=not done.is_set(),
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
