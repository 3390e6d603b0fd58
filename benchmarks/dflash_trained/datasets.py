#!/usr/bin/env python3
"""Helpers for device.sh.

datasets.py PROMPTS_JSON TOKENIZER_DIR OUT_DIR: one `specmon bench --dataset` file per request
set (ds_<set>.jsonl: the prompt's text, decoded from its token ids, and the set's max_tokens).
datasets.py --decode-tok-s BENCH_JSON: print the mean decode tok/s of a `specmon bench --json`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def find(obj: Any, key: str) -> Any:
    """The first value under `key` anywhere in a JSON tree (depth first)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            if (hit := find(v, key)) is not None:
                return hit
    elif isinstance(obj, list):
        for v in obj:
            if (hit := find(v, key)) is not None:
                return hit
    return None


def main() -> None:
    if sys.argv[1] == "--decode-tok-s":
        with open(sys.argv[2]) as fh:
            stats = find(json.load(fh), "decode_tok_s")
        mean = stats.get("mean") if isinstance(stats, dict) else stats
        print(f"{mean:.1f}" if isinstance(mean, int | float) else "")
        return
    from transformers import PreTrainedTokenizerFast

    prompts, tok_dir, out = sys.argv[1:4]
    tok = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    with open(prompts) as fh:
        data = json.load(fh)
    for name, spec in data.items():
        with open(os.path.join(out, f"ds_{name}.jsonl"), "w") as fh:
            for item in spec["items"]:
                text = tok.decode(item["prompt_ids"])
                fh.write(json.dumps({"prompt": text, "output_len": item["max_tokens"]}) + "\n")


if __name__ == "__main__":
    main()
