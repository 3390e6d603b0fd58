"""A stand-in `vllm` for host-mode bench/sweep tests: `vllm serve MODEL --host H --port P
[--speculative-config JSON] ...` serves specmon's simulator (every endpoint bench needs) with
n_spec = the config's num_speculative_tokens (0 without one).

Environment:
- FAKE_SWEEP_PROFILE: the simulator profile (default gemma4-26b-rtx5090m);
- FAKE_SWEEP_SPEED: the simulator's speed factor (default 50);
- FAKE_SWEEP_FAIL: comma-separated n_spec values whose start fails like a CUDA OOM (exit 1);
- FAKE_SWEEP_LOG: a file; each start appends its argv as one JSON line;
- FAKE_SWEEP_PIDS: a file; each process appends its pid.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def arg(argv: list[str], name: str) -> str | None:
    for i, token in enumerate(argv):
        if token == name and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(name + "="):
            return token.split("=", 1)[1]
    return None


def say(line: str) -> None:
    sys.stdout.write(f"(APIServer pid={os.getpid()}) INFO 11-23 05:00:00 [fake.py:1] {line}\n")
    sys.stdout.flush()


def main() -> int:
    argv = sys.argv[1:]
    for var, text in (("FAKE_SWEEP_LOG", json.dumps(argv)), ("FAKE_SWEEP_PIDS", str(os.getpid()))):
        path = os.environ.get(var)
        if path:
            with open(path, "a") as f:
                f.write(text + "\n")
    config = json.loads(arg(argv, "--speculative-config") or "{}")
    n_spec = int(config.get("num_speculative_tokens", 0))
    host = arg(argv, "--host") or "127.0.0.1"
    port = int(arg(argv, "--port") or "8000")
    say("vLLM server version 0.0.1-fake, serving model " + (argv[1] if len(argv) > 1 else ""))
    say("Starting to load model ...")
    fail = {int(x) for x in os.environ.get("FAKE_SWEEP_FAIL", "").split(",") if x.strip()}
    if n_spec in fail:
        sys.stdout.write(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 23.99 GiB of which 1.10 GiB is free.\n"
            "RuntimeError: Engine core initialization failed. See root cause above.\n"
        )
        sys.stdout.flush()
        return 1
    from specmon.sim.server import SimConfig, start_in_thread

    start_in_thread(
        SimConfig(
            profile=os.environ.get("FAKE_SWEEP_PROFILE", "gemma4-26b-rtx5090m"),
            n_spec=n_spec,
            speed=float(os.environ.get("FAKE_SWEEP_SPEED", "50")),
            seed=7,
            host=host,
            port=port,
            log_interval=0,
        ),
        log_sink=lambda _line: None,
    )
    say(f"Starting vLLM server on http://{host}:{port}")
    sys.stdout.write("INFO:     Application startup complete.\n")
    sys.stdout.flush()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
