#!/usr/bin/env python3
"""Send train.py's request sets (prompts.json: token ids) to a vLLM server, one at a time, and
measure each request's acceptance three ways: /metrics deltas around it (and per position),
the stream's chunk sizes (each chunk after the first = one step = 1 + accepted), and vLLM's own
per-request object where the server sends one (`metrics.speculative_decoding`, vLLM >= 0.29).
vLLM's token ids are saved per request, so "the same text on two servers" is checked, not assumed;
a repetition loop is detected from them (ground truth for specmon's loop flag).

usage: client.py URL prompts.json OUT.json LABEL [--sets a,b] [--model tiny]
Standard library only (runs beside any vLLM).
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request
from typing import Any

COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)
PER_POS = re.compile(
    r"vllm:spec_decode_num_accepted_tokens_per_pos_total\{[^}]*position=\"(\d+)\"[^}]*\} (\S+)"
)
BUCKET = 128


def scrape(url: str) -> tuple[dict[str, float], dict[int, float]]:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        for name in COUNTERS:
            if line.startswith(name + "{") or line.startswith(name + " "):
                totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        if m := PER_POS.match(line):
            per_pos[int(m.group(1))] = per_pos.get(int(m.group(1)), 0.0) + float(m.group(2))
    return totals, per_pos


def loop_tail(ids: list[int], max_period: int = 64) -> dict[str, int] | None:
    """The answer ends in a repetition loop: a period p <= max_period repeated over at least
    max(3p, 24) tokens at the end. Returns the period, where the loop starts and its length."""
    best = None
    for p in range(1, min(max_period, len(ids) // 3) + 1):
        run = 0
        for i in range(len(ids) - 1, p - 1, -1):
            if ids[i] != ids[i - p]:
                break
            run += 1
        if run + p >= max(3 * p, 24) and (best is None or run > best["length"]):
            best = {"period": p, "start": len(ids) - run - p, "length": run + p}
    return best


def stream(
    url: str, model: str, prompt: list[int], max_tokens: int, sampling: dict[str, Any]
) -> tuple[list[int], list[int], dict[str, Any] | None, float]:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    body.update(sampling)
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    chunks: list[int] = []
    ids: list[int] = []
    last, spec, t0 = 0, None, time.time()
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            ev = json.loads(line[5:])
            got = 0
            for ch in ev.get("choices") or []:
                if ch.get("token_ids"):
                    ids.extend(ch["token_ids"])
                    got += len(ch["token_ids"])
            usage = ev.get("usage") or {}
            done = usage.get("completion_tokens")
            if got:
                chunks.append(got)
            elif done is not None and done > last:
                chunks.append(done - last)
            if done is not None:
                last = done
            sd = (ev.get("metrics") or {}).get("speculative_decoding") or (
                (usage.get("metrics") or {}).get("speculative_decoding")
            )
            if sd:
                spec = sd
    return chunks, ids, spec, time.time() - t0


def by_position(prompt_len: int, chunks: list[int]) -> dict[int, list[int]]:
    """Decode chunk sizes keyed by the 128-token bucket of the step's first absolute position."""
    pos, out = prompt_len + (chunks[0] if chunks else 0), {}
    for c in chunks[1:]:
        out.setdefault(pos // BUCKET * BUCKET, []).append(c)
        pos += c
    return out


def summary(buckets: dict[int, list[int]]) -> dict[str, list[float]]:
    return {
        f"{lo}-{lo + BUCKET - 1}": [round(sum(v) / len(v), 3), len(v)]
        for lo, v in sorted(buckets.items())
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("prompts")
    ap.add_argument("out")
    ap.add_argument("label")
    ap.add_argument("--sets", default="")
    ap.add_argument("--model", default="tiny")
    a = ap.parse_args()
    with open(a.prompts) as fh:
        data = json.load(fh)
    wanted = [s for s in a.sets.split(",") if s] or list(data)
    res: dict[str, Any] = {"label": a.label, "url": a.url, "sets": {}}
    start, _ = scrape(a.url)
    for name in wanted:
        spec_set = data[name]
        rows, pooled, buckets = [], dict.fromkeys(COUNTERS, 0.0), {}
        for n, item in enumerate(spec_set["items"]):
            before, pos_before = scrape(a.url)
            chunks, ids, spec, wall = stream(
                a.url, a.model, item["prompt_ids"], item["max_tokens"], spec_set["sampling"]
            )
            time.sleep(0.6)  # the engine publishes its counters after the stream ends
            after, pos_after = scrape(a.url)
            delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in COUNTERS}
            for k in COUNTERS:
                pooled[k] += delta[k]
            drafts, accepted = delta[COUNTERS[0]], delta[COUNTERS[2]]
            same = 0
            for x, y in zip(ids, item.get("hf_greedy_ids", []), strict=False):
                if x != y:
                    break
                same += 1
            b = by_position(len(item["prompt_ids"]), chunks)
            for lo, v in b.items():
                buckets.setdefault(lo, []).extend(v)
            row = {
                "set": name,
                "index": n,
                "class": spec_set["class"],
                "sampling": spec_set["sampling"],
                "prompt_len": len(item["prompt_ids"]),
                "tokens": len(ids),
                "drafts": drafts,
                "accepted": accepted,
                "AL_metrics": round(1 + accepted / drafts, 3) if drafts else None,
                "per_pos": [
                    round((pos_after.get(i, 0) - pos_before.get(i, 0)) / drafts, 3)
                    if drafts
                    else None
                    for i in sorted(pos_after)
                ],
                "AL_chunks": round((sum(chunks) - chunks[0]) / (len(chunks) - 1), 3)
                if len(chunks) > 1
                else None,
                "AL_vllm_request": spec.get("mean_acceptance_length") if spec else None,
                "vllm_request_spec": spec,
                "n_chunks": len(chunks),
                "wall_s": round(wall, 3),
                "same_prefix_as_hf": same,
                "loop": loop_tail(ids),
                "chunk_AL_by_abs_pos": summary(b),
                "token_ids": ids,
            }
            print(
                a.label,
                name,
                json.dumps(
                    {k: v for k, v in row.items() if k not in ("token_ids", "vllm_request_spec")}
                ),
                flush=True,
            )
            rows.append(row)
        drafts, accepted = pooled[COUNTERS[0]], pooled[COUNTERS[2]]
        res["sets"][name] = {
            "class": spec_set["class"],
            "why": spec_set["why"],
            "sampling": spec_set["sampling"],
            "AL_pooled": round(1 + accepted / drafts, 3) if drafts else None,
            "AL_per_request": [r["AL_metrics"] for r in rows],
            "chunk_AL_by_abs_pos_pooled": summary(buckets),
            "requests": rows,
        }
        print(
            a.label,
            "SET",
            name,
            json.dumps({k: v for k, v in res["sets"][name].items() if k != "requests"}),
            flush=True,
        )
    end, _ = scrape(a.url)
    tot = {k: end.get(k, 0.0) - start.get(k, 0.0) for k in COUNTERS}
    res["total"] = tot
    res["total_AL"] = (
        round(1 + tot[COUNTERS[2]] / tot[COUNTERS[0]], 3) if tot[COUNTERS[0]] else None
    )
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(a.label, "TOTAL AL", res["total_AL"], flush=True)


if __name__ == "__main__":
    main()
