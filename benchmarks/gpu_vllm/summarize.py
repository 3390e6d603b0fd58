"""Helpers of run_on_device.sh: prompt files, and the checks of one server's results.

    python summarize.py prompts DIR N OUTPUT_LEN   # the same prompts for vllm bench serve (ShareGPT
                                                   # JSON) and specmon bench (--dataset JSONL)
    python summarize.py point DIR NAME             # AL from /metrics deltas, from the log's
                                                   # SpecDecoding line, from specmon bench's chunks;
                                                   # per-position rates; the GPU block; the flags
    python summarize.py compare DIR                # specmon bench vs vllm bench serve, per round

Standard library only (it runs beside vLLM on the GPU machine and here on copied results).
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
from pathlib import Path

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "generation": "vllm:generation_tokens_total",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def read_metrics(path: Path) -> tuple[dict[str, float], dict[int, float]]:
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    if not path.exists():
        return totals, per_pos
    for line in path.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        for key, family in COUNTERS.items():
            if name == family:
                totals[key] = totals.get(key, 0.0) + value
        if name == PER_POS:
            pos = re.search(r'position="(\d+)"', labels)
            if pos:
                p = int(pos.group(1))
                per_pos[p] = per_pos.get(p, 0.0) + value
    return totals, per_pos


def delta_al(before: Path, after: Path) -> dict[str, object]:
    (t0, p0), (t1, p1) = read_metrics(before), read_metrics(after)
    d = {k: t1.get(k, 0.0) - t0.get(k, 0.0) for k in COUNTERS}
    drafts = d["drafts"]
    out: dict[str, object] = {"delta": d}
    out["al"] = 1 + d["accepted"] / drafts if drafts else None
    out["per_position"] = (
        [round((p1.get(i, 0) - p0.get(i, 0)) / drafts, 4) for i in sorted(p1)] if drafts else None
    )
    return out


def log_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [x for x in path.read_text(errors="replace").splitlines() if "SpecDecoding" in x]


def words(rng: random.Random, n: int) -> str:
    vocab = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "river",
        "stone",
        "light",
        "cloud",
        "paper",
        "music",
        "garden",
        "window",
    ]
    return " ".join(rng.choice(vocab) for _ in range(n))


def cmd_prompts(d: Path, n: int, olen: int) -> None:
    rng = random.Random(0)
    prompts = [words(rng, 60) for _ in range(n + 2)]
    (d / "prompts-sharegpt.json").write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": p}]}
                for p in prompts
            ]
        )
    )
    (d / "prompts-specmon.jsonl").write_text(
        "".join(json.dumps({"prompt": p, "output_len": olen}) + "\n" for p in prompts)
    )


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def cmd_point(d: Path, name: str) -> None:
    got = delta_al(d / f"{name}.metrics-before.txt", d / f"{name}.metrics-after.txt")
    bench = load(d / f"{name}.bench.json")
    spec = bench.get("spec_decode") or {}
    summary = bench.get("summary") or {}
    watch = load(d / f"{name}.watch-during.json") or load(d / f"{name}.watch-after.json")
    after = load(d / f"{name}.watch-after.json")
    srv = next(iter((after.get("servers") or {}).values()), {})
    gpu = (watch.get("gpu") or {}).get("gpus") or (watch.get("gpu") or {}).get("latest")
    rows = (after.get("requests") or {}).get("rows") or []
    flagged = [r for r in rows if (r.get("vanilla") or {}).get("flagged")]
    reasons = sorted(
        {x.get("code") for r in flagged for x in (r.get("vanilla") or {}).get("reasons") or []}
    )
    lines = log_lines(d / f"{name}.server.log")
    print(f"--- {name}")
    print(f"  /metrics delta over bench: {got['delta']}  AL={got['al']}")
    print(f"  per-position (delta): {got['per_position']}")
    print(
        f"  specmon bench: AL={spec.get('acceptance_length')} server_al_mean="
        f"{spec.get('server_al_mean')} client_al_mean={spec.get('client_al_mean')} "
        f"per_position={spec.get('per_position')}"
    )
    print(
        f"  specmon bench: out tok/s={summary.get('output_throughput')} "
        f"ttft={((summary.get('ttft_ms') or {}).get('mean'))} "
        f"tpot={((summary.get('tpot_ms') or {}).get('mean'))} "
        f"vanilla_requests={summary.get('vanilla_requests')}"
    )
    breqs = bench.get("requests") or []
    codes = sorted({x[0] for r in breqs for x in r.get("vanilla_reasons") or [] if x})
    print(
        f"  bench vanilla: {sum(1 for r in breqs if r.get('vanilla'))}/{len(breqs)} "
        f"reasons={codes} baseline={(bench.get('server') or {}).get('baseline_tok_s')}"
    )
    print(f"  log: {lines[-1][-220:] if lines else 'no SpecDecoding line'}")
    print(f"  watch session: {json.dumps(after.get('session'))[:400]}")
    print(
        f"  watch server: n_spec={srv.get('n_spec')} spec_configured={srv.get('spec_configured')} "
        f"lifetime AL={(srv.get('lifetime') or {}).get('acceptance_length')}"
    )
    print(f"  watch rows flagged: {len(flagged)}/{len(rows)} reasons={reasons}")
    print(f"  GPU during bench: {json.dumps(gpu)[:600]}")


SERVER_SIDE = (
    "time_to_first_token_seconds",
    "request_time_per_output_token_seconds",
    "e2e_request_latency_seconds",
)


def server_means(m0: Path, m1: Path) -> dict[str, float]:
    """Mean of some of vLLM's own histograms over a run (sum and count deltas), in ms."""
    sums: list[dict[str, float]] = []
    for path in (m0, m1):
        got: dict[str, float] = {}
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                m = LINE.match(line)
                if m and m.group(1).startswith("vllm:"):
                    got[m.group(1)] = got.get(m.group(1), 0.0) + float(m.group(3))
        sums.append(got)
    out = {}
    for name in SERVER_SIDE:
        s = sums[1].get(f"vllm:{name}_sum", 0) - sums[0].get(f"vllm:{name}_sum", 0)
        c = sums[1].get(f"vllm:{name}_count", 0) - sums[0].get(f"vllm:{name}_count", 0)
        if c:
            out[f"server {name} ms"] = s / c * 1000
    return out


def cmd_compare(d: Path, clients: tuple[str, ...] = ("vllm", "specmon")) -> None:
    table: dict[str, dict[str, list[float]]] = {who: {} for who in clients}
    for r in (1, 2):
        for who in clients:
            res = load(d / f"cmp-{r}-{who}.json")
            al = delta_al(d / f"cmp-{r}-{who}.m0.txt", d / f"cmp-{r}-{who}.m1.txt")["al"]
            if who != "specmon":
                vals = {
                    "output tok/s": res.get("output_throughput"),
                    "mean TTFT ms": res.get("mean_ttft_ms"),
                    "median TTFT ms": res.get("median_ttft_ms"),
                    "mean TPOT ms": res.get("mean_tpot_ms"),
                    "median TPOT ms": res.get("median_tpot_ms"),
                    "AL (tool)": res.get("spec_decode_acceptance_length"),
                }
            else:
                s = res.get("summary") or {}
                vals = {
                    "output tok/s": s.get("output_throughput"),
                    "mean TTFT ms": (s.get("ttft_ms") or {}).get("mean"),
                    "median TTFT ms": (s.get("ttft_ms") or {}).get("median"),
                    "mean TPOT ms": (s.get("tpot_ms") or {}).get("mean"),
                    "median TPOT ms": (s.get("tpot_ms") or {}).get("median"),
                    "AL (tool)": (res.get("spec_decode") or {}).get("acceptance_length"),
                }
            vals["AL (/metrics delta)"] = al
            vals.update(server_means(d / f"cmp-{r}-{who}.m0.txt", d / f"cmp-{r}-{who}.m1.txt"))
            for k, v in vals.items():
                if isinstance(v, (int, float)):
                    table[who].setdefault(k, []).append(float(v))
            print(f"  round {r} {who}: " + ", ".join(f"{k}={v}" for k, v in vals.items()))
    print("| metric | " + " | ".join(clients) + " | specmon / first |")
    print("|---|" + "---:|" * (len(clients) + 1))
    for k in table[clients[0]]:
        means = [statistics.mean(table[w][k]) if table[w].get(k) else None for w in clients]
        first, last = means[0], means[-1]
        ratio = f"{last / first:.3f}" if first and last is not None else ""
        cells = " | ".join("" if m is None else f"{m:.3f}" for m in means)
        print(f"| {k} | {cells} | {ratio} |")


def main(argv: list[str]) -> int:
    if argv[0] == "prompts":
        cmd_prompts(Path(argv[1]), int(argv[2]), int(argv[3]))
    elif argv[0] == "point":
        cmd_point(Path(argv[1]), argv[2])
    elif argv[0] == "compare":
        cmd_compare(Path(argv[1]))
    elif argv[0] == "compare3":
        cmd_compare(Path(argv[1]), ("vllm", "vllmso", "specmon"))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
