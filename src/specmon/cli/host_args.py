"""The host-mode flags on the command line of `specmon serve`, `chat`, `bench` and `sweep`: one
option per field of `runtime.host_plan.HostFlags` (the plan and the start sequence live there)."""

from __future__ import annotations

import argparse
from typing import Any

from specmon.cli.args import key_value, port, positive_seconds
from specmon.sources.host.spec import DEFAULT_HOST, DEFAULT_PORT, METHODS


def host_requested(args: Any) -> bool:
    """bench and sweep: host mode (a target model or a preset, and no attached server)."""
    return bool(getattr(args, "model", None) or getattr(args, "preset", None))


def add_host_arguments(parser: argparse.ArgumentParser, *, model: bool = True) -> None:
    """The host-mode flags, and the extra `vllm serve` arguments after `--`.

    With `model=False` no `--model` is added: a parser that already has one (`specmon chat`'s
    "model to chat with", dest `model`) shares it, and host mode reads it as the target."""
    g = parser.add_argument_group("host mode (start vllm serve)")
    if model:
        g.add_argument("--model", help="target model (HF id or local path); a preset can give it")
    g.add_argument("--draft", help="draft model (the method defaults to dflash when given)")
    g.add_argument("--method", choices=METHODS, help="speculation method")
    g.add_argument("--n-spec", type=int, metavar="K", help="num_speculative_tokens")
    g.add_argument(
        "--n-spec-per-batch",
        metavar="SPEC",
        help="dynamic speculation (num_speculative_tokens_per_batch_size): BS_START-BS_END:K,... "
        "e.g. 1-4:8,5-64:4, or a JSON list of [bs_start, bs_end, k]",
    )
    g.add_argument(
        "--spec-option",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="another speculative-config key (VALUE as JSON when it parses), e.g. "
        "attention_backend=FLASH_ATTN (repeatable)",
    )
    g.add_argument("--preset", metavar="NAME", help="a working configuration (`specmon presets`)")
    g.add_argument(
        "--host", default=None, help=f"address vLLM binds (default {DEFAULT_HOST}: this machine)"
    )
    g.add_argument(
        "--port", type=port, default=None, help=f"port (default {DEFAULT_PORT}; 0 = a free one)"
    )
    g.add_argument("--vllm", metavar="PATH", help="the vllm executable (default: vllm on PATH)")
    g.add_argument(
        "--env",
        action="append",
        default=[],
        type=key_value,
        metavar="NAME=VALUE",
        help="an environment variable for vLLM (repeatable; secret values never printed)",
    )
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact command line and the environment it sets, then exit",
    )
    g.add_argument(
        "--ready-timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for /health 200 (default 1800)",
    )
    g.add_argument("--log-file", metavar="FILE", help="vLLM's log (default: in the XDG state dir)")
    g.add_argument(
        "--skip-arg-check",
        action="store_true",
        help="do not run vLLM's own parser over the arguments before launch",
    )
    g.add_argument(
        "vllm_args",
        nargs="*",
        metavar="-- VLLM_ARGS",
        help="extra `vllm serve` arguments after `--` (they override the preset's)",
    )
