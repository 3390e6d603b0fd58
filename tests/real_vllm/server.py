"""Start and stop one real `vllm serve` process (its whole process group) for the test tier.

A server runs in its own session (start_new_session), so stopping it signals every process vLLM
spawned (API server, engine core, worker). Stopping verifies that no process of the group is left.
Each server has a guard process (guard.py) that stops the group if the run that started it dies
without stopping it (SIGTERM or SIGKILL of pytest, a pytest-xdist worker ended by its controller).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.real_vllm import guard as guard_script
from tests.real_vllm.guard import group_members
from tests.real_vllm.tiny_models import TinyModels
from tests.real_vllm.vllm_env import vllm_cache_root

from specmon.sources.host.process import make_scratch, scratch_environment

MODEL_NAME = "tiny"
N_SPEC = 4
DFLASH_PAIR = Path(__file__).resolve().parent / "dflash_pair"
"""A trained target and DFlash drafter (K = 7), committed: see dflash_pair/README.md."""
SPEC_METRICS = "detailed"
"""`--per-request-spec-decode-metrics` of every speculative server of the tier: each response then
carries vLLM's own per-request `metrics.speculative_decoding`, per-step arrays included."""
READY_TIMEOUT_S = 300.0
STOP_TERM_WAIT_S = 15.0
STOP_GROUP_TERM_WAIT_S = 5.0
STOP_KILL_WAIT_S = 10.0
LOG_TAIL_LINES = 50


@dataclass(frozen=True)
class ServerSpec:
    """What one server runs: its speculation method and, for draft_model, which draft."""

    name: str
    method: str | None  # "ngram", "draft_model", "dflash" or None (no speculative decoding)
    draft: str | None = None  # attribute of TinyModels: "draft_same", "draft_noised", "draft_other"
    n_spec: int | None = N_SPEC
    spec_metrics: str | None = SPEC_METRICS
    """`--per-request-spec-decode-metrics` (none|summary|detailed); None: the flag is not given
    (vLLM refuses any level but none without speculative decoding)."""
    timing_metrics: bool = False
    """`--enable-per-request-metrics`: the final usage chunk also carries vLLM's per-request
    timings (queue, TTFT, generation time, mean ITL), which specmon splits TTFT with."""

    def target(self, models: TinyModels) -> Path:
        """The served model: the trained pair's own target for dflash, else the tiny target."""
        return DFLASH_PAIR / "target" if self.method == "dflash" else models.target

    def speculative_config(self, models: TinyModels) -> dict[str, object] | None:
        if self.method == "dflash":
            return {
                "method": "dflash",
                "model": str(DFLASH_PAIR / "dflash"),
                "num_speculative_tokens": self.n_spec,
            }
        if self.method == "ngram":
            return {
                "method": "ngram",
                "num_speculative_tokens": self.n_spec,
                "prompt_lookup_max": 4,
                "prompt_lookup_min": 2,
            }
        if self.method == "draft_model":
            assert self.draft is not None
            return {
                "method": "draft_model",
                "model": str(getattr(models, self.draft)),
                "num_speculative_tokens": self.n_spec,
            }
        return None


SPECS: dict[str, ServerSpec] = {
    spec.name: spec
    for spec in (
        ServerSpec("draft_same", "draft_model", "draft_same", timing_metrics=True),
        ServerSpec("draft_noised", "draft_model", "draft_noised"),
        ServerSpec("draft_other", "draft_model", "draft_other"),
        ServerSpec("ngram", "ngram"),
        ServerSpec("plain", None, None, None, None),
        # A learned DFlash drafter (K = 7: its block is 8): real, text-dependent acceptance.
        ServerSpec("dflash_trained", "dflash", n_spec=7),
        # Only for the golden captures of the per-request object (capture_golden.py): the noised
        # draft (partial acceptance) at each level vLLM offers.
        ServerSpec("spec_detailed", "draft_model", "draft_noised", spec_metrics="detailed"),
        ServerSpec("spec_summary", "draft_model", "draft_noised", spec_metrics="summary"),
    )
}


class ServerStartError(RuntimeError):
    """The server exited or did not become healthy; the message ends with its log's last lines."""


class ServerStopError(RuntimeError):
    """Processes of the server's group survived SIGTERM and SIGKILL."""


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server may still lose a race for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:])


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of all live processes of a group, summed (bytes)."""
    total = 0
    for pid, state in group_members(pgid):
        if state == "Z":
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def server_env() -> dict[str, str]:
    """The environment of a server: CPU target, 1 GiB KV cache, stats every second, no colour."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    env.update(
        {
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_LOG_STATS_INTERVAL": "1",
            "VLLM_CACHE_ROOT": str(vllm_cache_root()),
            # vllm-cpu 0.32.0 cannot load its own AOT-compiled artifacts ("'function' object has
            # no attribute 'finalize_loading'") and recompiles on every start; the classic
            # compile cache does load, which halves engine init on later starts.
            "VLLM_USE_AOT_COMPILE": "0",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "NO_COLOR": "1",
        }
    )
    return env


def serve_args(spec: ServerSpec, models: TinyModels, port: int) -> list[str]:
    """The arguments after `vllm serve` for one spec."""
    args = [
        str(spec.target(models)),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        MODEL_NAME,
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "1024",
        "--max-num-seqs",
        "8",
    ]
    config = spec.speculative_config(models)
    if config is not None:
        args += ["--speculative-config", json.dumps(config)]
    if spec.spec_metrics is not None:
        args += ["--per-request-spec-decode-metrics", spec.spec_metrics]
    if spec.timing_metrics:
        args.append("--enable-per-request-metrics")
    return args


@dataclass
class VllmServer:
    """One running `vllm serve`: what tests get from the server fixtures."""

    spec: ServerSpec
    url: str
    port: int
    log_path: Path
    args: list[str]
    process: subprocess.Popen[bytes] = field(repr=False)
    started_s: float = 0.0  # seconds from launch to healthy
    model_name: str = MODEL_NAME
    guard: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    """Stops the group if this run dies first (guard.py); released once `stop` has."""
    scratch: Path | None = field(default=None, repr=False)
    """The server's TMPDIR (vLLM's IPC sockets and init file), removed with the group."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def method(self) -> str | None:
        return self.spec.method

    @property
    def n_spec(self) -> int | None:
        return self.spec.n_spec

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return self.process.poll() is None

    def rss_bytes(self) -> int:
        """Resident memory of the API server, engine core and worker together."""
        return group_rss_bytes(self.process.pid)

    def stop(self) -> None:
        """Stop the whole process group and verify that no process of it remains.

        SIGTERM goes to the API server first (vLLM then shuts its engine down in order), then to
        the whole group, then SIGKILL to whatever is left.
        """
        try:
            self._stop_group()
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        finally:
            release_guard(self.guard)

    def _stop_group(self) -> None:
        pgid = self.process.pid  # leader of its own session and group
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        if _wait_group_gone(self.process, pgid, STOP_TERM_WAIT_S):
            return
        for sig, wait_s in (
            (signal.SIGTERM, STOP_GROUP_TERM_WAIT_S),
            (signal.SIGKILL, STOP_KILL_WAIT_S),
        ):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            if _wait_group_gone(self.process, pgid, wait_s):
                return
        raise ServerStopError(
            f"vllm server {self.name}: processes of group {pgid} survived SIGKILL: "
            f"{group_members(pgid)}"
        )


def start_guard(pgid: int, scratch: Path | None = None) -> subprocess.Popen[bytes]:
    """A guard.py process for group `pgid`: it stops the group (and removes its `scratch`
    folder) when this process's end of its standard input closes without a release (this
    process died)."""
    return subprocess.Popen(
        [sys.executable, guard_script.__file__, str(pgid), *([str(scratch)] if scratch else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # neither a Ctrl-C nor a signal to the run's group reaches it
    )


def release_guard(guard: subprocess.Popen[bytes] | None) -> None:
    """Tell a guard that its server was stopped here, and reap it (idempotent)."""
    if guard is None or guard.stdin is None or guard.stdin.closed:
        return
    with contextlib.suppress(OSError):  # BrokenPipeError: the guard already ended
        guard.stdin.write(f"{guard_script.RELEASE}\n".encode())
        guard.stdin.flush()
    with contextlib.suppress(OSError):
        guard.stdin.close()
    try:
        guard.wait(timeout=10)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


def _wait_group_gone(process: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)
        # Zombies hold no memory and are reaped by their parent; only live members count.
        if not [pid for pid, state in group_members(pgid) if state != "Z"]:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def start_server(
    spec: ServerSpec,
    python: Path,
    models: TinyModels,
    log_dir: Path,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> VllmServer:
    """Launch `vllm serve` for `spec` and wait until /health answers 200.

    Retries once on a new port if the first one was taken between probing and binding.
    """
    for attempt in (1, 2):
        port = free_port()
        log_path = log_dir / f"vllm-{spec.name}.log"
        args = serve_args(spec, models, port)
        vllm = python.parent / "vllm"
        # vLLM leaves its IPC sockets and init file in its temporary folder: one of its own,
        # removed with it (the compile cache stays where it was), as host mode does.
        scratch = make_scratch()
        env = scratch_environment(server_env(), scratch)
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                [str(vllm), "serve", *args],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        server = VllmServer(
            spec, f"http://127.0.0.1:{port}", port, log_path, args, process,
            guard=start_guard(process.pid, scratch), scratch=scratch,
        )  # fmt: skip
        launched = time.monotonic()
        try:
            wait_healthy(server, ready_timeout_s)
        except ServerStartError:
            server.stop()
            if attempt == 1 and "address already in use" in log_tail(log_path).lower():
                continue
            raise
        except BaseException:  # a test timeout or Ctrl-C while waiting: leave no orphans
            server.stop()
            raise
        server.started_s = time.monotonic() - launched
        return server
    raise AssertionError("unreachable")


def wait_healthy(server: VllmServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise ServerStartError(
                    f"vllm server {server.name} exited with code {code} before it was ready; "
                    f"last {LOG_TAIL_LINES} lines of {server.log_path}:\n"
                    + log_tail(server.log_path)
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{server.url}/health").status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"vllm server {server.name} not healthy after {timeout_s:.0f} s; "
                    f"last {LOG_TAIL_LINES} lines of {server.log_path}:\n"
                    + log_tail(server.log_path)
                )
            time.sleep(0.5)
