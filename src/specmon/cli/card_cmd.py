"""`specmon card RESULT`: a shareable, redacted summary of a bench result or a sweep.

RESULT is a bench `--json` file, a sweep folder, or its `sweep.json`/`summary.json`. The card
holds the GPU, driver, vLLM, model, drafter, method, K, acceptance length and acceptance per
draft position (1..K), speed, thermals, the workload and the recommended `vllm serve` line: the
tables users paste into issues. Markdown on stdout by default; `--json` for JSON; `--output FILE`
writes there instead. API keys and tokens are always removed; server URLs, host names and
addresses (bare ones too), and local paths (cut to their last part), are left out unless
`--include-hosts` / `--include-paths`.
See docs/card.md.

Exit status: 0; 2 for bad arguments or a RESULT that is not a bench result or a sweep; 1 when
the output cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

NAME = "card"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="write a shareable, redacted rig card (Markdown/JSON) of a bench or sweep result",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("result", metavar="RESULT", help="bench --json file, or a sweep folder")
    p.add_argument("--json", action="store_true", help="write JSON instead of Markdown")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--include-hosts", action="store_true", help="keep server URLs, host names and addresses"
    )
    p.add_argument(
        "--include-paths", action="store_true", help="keep local paths (models, datasets) whole"
    )


@dataclass(frozen=True, slots=True)
class CardPlan:
    result: str
    include_hosts: bool = False
    include_paths: bool = False
    json: bool = False
    output: str | None = None


def plan_from(args: argparse.Namespace) -> CardPlan:
    return CardPlan(
        args.result,
        include_hosts=args.include_hosts,
        include_paths=args.include_paths,
        json=args.json,
        output=args.output,
    )


def run(plan: CardPlan) -> int:
    from specmon.bench.card import (
        CardError,
        Redaction,
        card_json_text,
        card_markdown,
        load_card,
    )

    redaction = Redaction(include_hosts=plan.include_hosts, include_paths=plan.include_paths)
    try:
        card = load_card(plan.result, redaction)
    except CardError as exc:
        print(f"specmon card: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    text = card_json_text(card) if plan.json else card_markdown(card)
    if plan.output is None:
        sys.stdout.write(text)
        return 0
    from pathlib import Path

    try:
        Path(plan.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"specmon card: cannot write {plan.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
