"""Checks made before a `vllm serve` is launched: vLLM present, port free, GPU memory, arguments.

- `find_vllm()`: the `vllm` executable (`--vllm PATH`, else on PATH); its absence is an error that
  prints the install command.
- `vllm_python()` / `vllm_version()`: the python that runs that `vllm` (from its `#!` line) and the
  installed vLLM version, read from package metadata (fast; no vLLM import).
- `port_free()` / `pick_free_port()`: the port is bindable on the host address.
- `gpu_memory_warning()`: free GPU memory (NVML, through the GPU sampler) against a preset's need.
- `check_arguments()`: the whole argument list through vLLM's own parser (sources.vllm_args), with
  `--per-request-spec-decode-metrics detailed` kept only when the build accepts it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from specmon.core.errors import SpecmonError
from specmon.core.events import GpuSampled
from specmon.sources.host.spec import metrics_flags
from specmon.sources.vllm_args import ArgsVerdict, ServeArgsCheck, check_serve_args

INSTALL_HINT = "pip install 'specmon[host]'"


class HostCheckError(SpecmonError):
    """A pre-launch check that stops the launch (the message says what to do)."""


def find_vllm(path: str | None = None) -> Path:
    """The vllm executable: `path` (file or directory holding bin/vllm), else `vllm` on PATH."""
    if path:
        candidate = Path(path).expanduser()
        if candidate.is_dir():
            for inner in (candidate / "bin" / "vllm", candidate / "vllm"):
                if inner.is_file():
                    candidate = inner
                    break
        if not candidate.is_file():
            raise HostCheckError(
                f"--vllm {path}: no such executable; install vLLM with: {INSTALL_HINT}"
            )
        if not os.access(candidate, os.X_OK):
            raise HostCheckError(f"--vllm {path}: not executable")
        return candidate
    found = shutil.which("vllm")
    if found is None:
        raise HostCheckError(
            "vLLM is not installed here (no `vllm` on PATH). Install it with: "
            f"{INSTALL_HINT}  (or point --vllm at an existing vllm executable)"
        )
    return Path(found)


def vllm_python(vllm: Path) -> Path | None:
    """The python interpreter of a `vllm` console script, from its `#!` line (None if not one)."""
    try:
        with vllm.open("rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").strip().split()
    if not parts:
        return None
    if Path(parts[0]).name == "env" and len(parts) > 1:
        found = shutil.which(parts[1])
        return Path(found) if found else None
    return Path(parts[0])


_VERSION_SCRIPT = (
    "import importlib.metadata as m\n"
    "try:\n    print(m.version('vllm'))\n"
    "except m.PackageNotFoundError:\n    print('')\n"
)


def vllm_version(python: Path | None, timeout_s: float = 30.0) -> str | None:
    """The installed vLLM version as its package metadata says (None when unknown)."""
    if python is None:
        return None
    try:
        done = subprocess.run(
            [str(python), "-c", _VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return version[0] if version and version[0] else None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def port_free(host: str, port: int) -> bool:
    """True when `host:port` can be bound now (as vLLM binds it, with SO_REUSEADDR)."""
    bind_host = "" if host in ("0.0.0.0", "::") else host
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
        except OSError:
            return False
    return True


def pick_free_port(host: str) -> int:
    """A port that was free on `host` a moment ago."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind(("" if host in ("0.0.0.0", "::") else host, 0))
        return int(sock.getsockname()[1])


class GpuSampler(Protocol):
    def sample(self, now: float) -> GpuSampled: ...


def gpu_memory_warning(
    need_gib: float | None, sampler: GpuSampler
) -> tuple[str | None, str | None]:
    """(warning or None, GPU name or None): warns when no GPU has `need_gib` free."""
    sample = sampler.sample(0.0)
    names = [r.name for r in sample.gpus if r.name]
    gpu = names[0] if names else None
    if need_gib is None:
        return None, gpu
    if not sample.gpus:
        return None, gpu  # no GPU readings (no NVML here): nothing to compare
    free: list[float] = []
    for reading in sample.gpus:
        if reading.memory_total_bytes is None or reading.memory_used_bytes is None:
            continue
        free.append((reading.memory_total_bytes - reading.memory_used_bytes) / 2**30)
    if not free:
        return None, gpu
    best = max(free)
    if best >= need_gib:
        return None, gpu
    return (
        f"warning: the preset needs about {need_gib:g} GiB of free GPU memory, the most free on "
        f"any GPU is {best:.1f} GiB; vLLM may fail with CUDA out of memory",
        gpu,
    )


@dataclass(frozen=True)
class ArgumentCheck:
    """The parser's verdict on the final argument list, and whether `detailed` was kept."""

    result: ServeArgsCheck
    detailed_metrics: bool


def check_arguments(
    args: Sequence[str], python: Path | None, *, want_detailed: bool, timeout_s: float = 180.0
) -> ArgumentCheck:
    """Validate `args` (what follows `vllm serve`) with vLLM's own parser.

    With `want_detailed`, `--per-request-spec-decode-metrics detailed` and
    `--enable-per-request-metrics` (spec.metrics_flags) are tried first; if this build does not
    know them, the arguments are checked again without them.
    """
    if python is None:
        return ArgumentCheck(
            ServeArgsCheck(ArgsVerdict.UNCHECKED, "the vllm executable names no python"), False
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if want_detailed:
        first = check_serve_args(
            [*args, *metrics_flags(args)], python, env=env, timeout_s=timeout_s
        )
        if first.ok:
            return ArgumentCheck(first, True)
        if first.verdict is ArgsVerdict.UNCHECKED:
            return ArgumentCheck(first, False)
        if "per-request" not in first.message:
            return ArgumentCheck(first, False)
    return ArgumentCheck(check_serve_args(args, python, env=env, timeout_s=timeout_s), False)
