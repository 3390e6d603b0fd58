"""Presets: the users' working DFlash setups (the seeds), and the user's own from config.toml.

Each built-in preset names the seed it comes from and the vLLM build it was proven on. Users add
presets in `$XDG_CONFIG_HOME/specmon/config.toml` (or the file `$SPECMON_CONFIG` names):

    [presets.my-box]
    based_on = "rtx5090-gemma4-26b-dflash"   # optional: start from another preset
    n_spec = 10
    vllm_args = ["--max-model-len", "4096"]
    env = { VLLM_USE_FLASHINFER_SAMPLER = "0" }
    spec_options = { attention_backend = "FLASH_ATTN" }
    gpu_memory_gib = 28
    proven_on = "vLLM 0.32.0"

A TOML error is reported with the file and the line; an unknown key with the preset and the
valid keys; a file that is not a regular file (a device, a FIFO) or is over 1 MiB is refused
before it is read. A user preset with a built-in's name replaces it.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specmon.core.errors import SpecmonError
from specmon.sources.host.spec import mask_env

CONFIG_ENV = "SPECMON_CONFIG"


class PresetError(SpecmonError, ValueError):
    """An unknown preset, or a config file that cannot be read (message: file and line)."""


@dataclass(frozen=True)
class Preset:
    """One working configuration: models, speculation, vLLM arguments and environment."""

    name: str
    summary: str
    model: str
    seed: str
    """Where it comes from (a seed write-up, or the user's own words)."""
    proven_on: str
    """The vLLM build (and hardware) it was proven on."""
    draft: str | None = None
    method: str | None = None
    n_spec: int | None = None
    spec_options: Mapping[str, Any] = field(default_factory=dict)
    vllm_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    gpu_memory_gib: float | None = None
    """Free GPU memory the preset needs (GiB) for the pre-launch warning; None: not checked."""
    note: str = ""
    source: str = "built-in"


_GEMMA4_26B_AWQ = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"
_GEMMA4_26B_DFLASH = "z-lab/gemma-4-26B-A4B-it-DFlash"

BUILTIN_PRESETS: tuple[Preset, ...] = (
    Preset(
        name="rtx5090-gemma4-26b-dflash",
        summary="Gemma-4-26B-A4B AWQ + z-lab DFlash, 32 GB RTX 5090, n=13",
        model=_GEMMA4_26B_AWQ,
        draft=_GEMMA4_26B_DFLASH,
        method="dflash",
        n_spec=13,
        spec_options={"attention_backend": "FLASH_ATTN"},
        vllm_args=(
            "--max-num-seqs",
            "1",
            "--max-num-batched-tokens",
            "8192",
            "--max-model-len",
            "2048",
            "--gpu-memory-utilization",
            "0.93",
            "--kv-cache-dtype",
            "fp8",
            "--trust-remote-code",
        ),
        env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
        gpu_memory_gib=28.0,
        seed="seeds 004 (the production config: n=13 sweep winner, max-num-batched-tokens 8192 "
        "for a cleaner p95) and 001 (the same bench: 578 tok/s, 2.56x over 228 tok/s)",
        proven_on="vLLM 0.19.2rc1 on an RTX 5090 (32 GB)",
        note='the seed wrote the drafter backend as "flash_attn"; vLLM\'s enum name '
        "FLASH_ATTN is used here",
    ),
    Preset(
        name="rtx5090-laptop-gemma4-26b-dflash",
        summary="Gemma-4-26B-A4B AWQ + z-lab DFlash, 24 GB RTX 5090 Laptop, n=8",
        model=_GEMMA4_26B_AWQ,
        draft=_GEMMA4_26B_DFLASH,
        method="dflash",
        n_spec=8,
        vllm_args=(
            "--attention-backend",
            "TRITON_ATTN",
            "--kv-cache-dtype",
            "fp8",
            "--enable-prefix-caching",
            "--max-num-seqs",
            "4",
        ),
        gpu_memory_gib=21.0,
        seed="seed 000 (n_spec sweep on the 5090M: n=8 peak ~224 t/s stable; shows the "
        "5 fast / 1 / 3 degraded / 1 cycle)",
        proven_on="vLLM 0.20.2 (tokenspeed-preview image) on an RTX 5090 Laptop (24 GB, sm_120)",
        note="0.19.2 and 0.18.2 images failed with this combination (non-causal attention / no "
        "DFlash for gemma4_text); the seed names no max-model-len or memory settings",
    ),
    Preset(
        name="h100-gemma4-26b-dflash",
        summary="Gemma-4-26B-A4B + z-lab DFlash, 80 GB H100, n=15",
        model=_GEMMA4_26B_AWQ,
        draft=_GEMMA4_26B_DFLASH,
        method="dflash",
        n_spec=15,
        spec_options={"attention_backend": "FLASH_ATTN"},
        vllm_args=(
            "--attention-backend",
            "TRITON_ATTN",
            "--max-num-batched-tokens",
            "32768",
            "--max-model-len",
            "2048",
            "--gpu-memory-utilization",
            "0.93",
            "--kv-cache-dtype",
            "fp8",
            "--trust-remote-code",
        ),
        env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
        gpu_memory_gib=60.0,
        seed="seed 003 (H100: Triton for the target, FlashAttention for the drafter, 15 drafts "
        "per step, ~32,000 batched tokens; 222 tok/s, AL ~7.8, 3.4x) on the 5090 preset's base",
        proven_on="a vLLM build of the DFlash development branch on an H100 80 GB (the seed "
        "names no version)",
        note="the seed gives the batch budget as ~32,000 tokens (32768 here) and does not name "
        "the exact checkpoint; the AWQ target of the 5090 presets is used",
    ),
    Preset(
        name="dgx-spark-gemma4-31b-dflash",
        summary="Gemma-4-31B-it + RedHatAI speculator.dflash, DGX Spark (GB10), fp8, n=8",
        model="google/gemma-4-31B-it",
        draft="RedHatAI/gemma-4-31B-it-speculator.dflash",
        method="dflash",
        n_spec=8,
        vllm_args=(
            "--quantization",
            "fp8",
            "--max-model-len",
            "16384",
            "--max-num-batched-tokens",
            "16384",
            "--gpu-memory-utilization",
            "0.80",
            "--enforce-eager",
            "--limit-mm-per-prompt",
            '{"image":0,"video":0}',
            "--tensor-parallel-size",
            "1",
        ),
        env={"VLLM_DISABLE_COMPILE_CACHE": "1"},
        gpu_memory_gib=None,  # unified memory: NVML's framebuffer figures do not apply
        seed="seed 002 (DGX Spark / GB10, text-only: 15.44 tok/s vs 5.53 baseline, 2.79x, "
        "acceptance 28.8%)",
        proven_on="vLLM 0.19.2rc1.dev21+g893611813 (vllm/vllm-openai:nightly) on one DGX Spark",
        note="that seed needed three runtime patches on top of the nightly: disable the CUTLASS "
        "FP8 capability checks for GB10, advertise non-causal support in the Triton backend "
        "selector, and force FlashAttention inside qwen3_dflash only; a stock build may fail "
        "with 'non-causal attention not supported'",
    ),
)


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """$SPECMON_CONFIG, else ${XDG_CONFIG_HOME:-~/.config}/specmon/config.toml."""
    env = os.environ if environ is None else environ
    explicit = env.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "specmon" / "config.toml"


_PRESET_KEYS: dict[str, type | tuple[type, ...]] = {
    "summary": str,
    "model": str,
    "draft": str,
    "method": str,
    "n_spec": int,
    "spec_options": dict,
    "vllm_args": list,
    "env": dict,
    "gpu_memory_gib": (int, float),
    "seed": str,
    "proven_on": str,
    "note": str,
    "based_on": str,
}


def _toml_error(path: Path, error: tomllib.TOMLDecodeError) -> PresetError:
    text = str(error)
    m = re.search(r"\(at line (\d+), column (\d+)\)", text)
    line = getattr(error, "lineno", None) or (int(m.group(1)) if m else None)
    message = re.sub(r"\s*\(at line \d+, column \d+\)", "", getattr(error, "msg", text))
    where = f"{path}:{line}" if line else str(path)
    return PresetError(f"{where}: TOML error: {message}")


MAX_CONFIG_BYTES = 1 << 20
"""The largest config file read (1 MiB): a config of presets is a few KB."""


def read_config_bytes(path: Path) -> bytes | None:
    """The config file's bytes; None when it does not exist. A device, a FIFO or a file over
    MAX_CONFIG_BYTES is refused (PresetError naming the file) before it is read whole."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PresetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise PresetError(f"{path}: {kind}; the config must be a TOML file")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PresetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise PresetError(
            f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; a config file is small"
        )
    return data


def read_config_toml(path: Path) -> dict[str, Any] | None:
    """The config file parsed (None when it does not exist); PresetError (one line naming the
    file, and the line for a TOML error) when it cannot be read or parsed."""
    data = read_config_bytes(path)
    if data is None:
        return None
    try:
        return tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(path, exc) from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise PresetError(f"{path}: TOML error: nested too deeply") from None


def load_user_presets(path: Path | None = None) -> tuple[Preset, ...]:
    """Presets from the config file (none when it does not exist)."""
    path = path or config_path()
    doc = read_config_toml(path)
    if doc is None:
        return ()
    table = doc.get("presets", {})
    if not isinstance(table, dict):
        raise PresetError(f"{path}: [presets] must be a table of tables ([presets.NAME])")
    builtin = {p.name: p for p in BUILTIN_PRESETS}
    found: dict[str, Preset] = {}
    for name, raw in table.items():
        if not isinstance(raw, dict):
            raise PresetError(f"{path}: presets.{name} must be a table ([presets.{name}])")
        found[name] = _preset_from(path, name, raw, {**builtin, **found})
    return tuple(found.values())


def _preset_from(path: Path, name: str, raw: dict[str, Any], known: dict[str, Preset]) -> Preset:
    where = f"{path}: presets.{name}"
    for key, value in raw.items():
        expected = _PRESET_KEYS.get(key)
        if expected is None:
            raise PresetError(
                f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(_PRESET_KEYS))}"
            )
        if not isinstance(value, expected) or isinstance(value, bool):
            raise PresetError(f"{where}.{key}: wrong type {type(value).__name__}")
    if "vllm_args" in raw and not all(isinstance(a, str) for a in raw["vllm_args"]):
        raise PresetError(f"{where}.vllm_args: must be a list of strings")
    if "env" in raw and not all(isinstance(v, str) for v in raw["env"].values()):
        raise PresetError(f"{where}.env: values must be strings")
    base_name = raw.get("based_on")
    if base_name is not None:
        base = known.get(base_name)
        if base is None:
            raise PresetError(
                f"{where}.based_on: no preset {base_name!r}; known: {', '.join(sorted(known))}"
            )
    else:
        if "model" not in raw:
            raise PresetError(f'{where}: needs model = "..." (or based_on = "PRESET")')
        base = Preset(name=name, summary="", model=raw["model"], seed="", proven_on="")
    updates: dict[str, Any] = {
        k: v for k, v in raw.items() if k not in ("based_on", "vllm_args", "env", "spec_options")
    }
    if "vllm_args" in raw:
        updates["vllm_args"] = tuple(raw["vllm_args"])
    if "env" in raw:
        updates["env"] = {**base.env, **raw["env"]}
    if "spec_options" in raw:
        updates["spec_options"] = {**base.spec_options, **raw["spec_options"]}
    if "gpu_memory_gib" in raw:
        updates["gpu_memory_gib"] = float(raw["gpu_memory_gib"])
    preset = replace(base, name=name, source=str(path), **updates)
    if base_name is not None and "seed" not in raw:
        preset = replace(preset, seed=f"based on {base_name}: {base.seed}")
    return preset


def all_presets(path: Path | None = None) -> dict[str, Preset]:
    """Built-in presets, then the user's (a user preset replaces a built-in of the same name)."""
    presets = {p.name: p for p in BUILTIN_PRESETS}
    for preset in load_user_presets(path):
        presets[preset.name] = preset
    return presets


def find_preset(name: str, presets: Mapping[str, Preset]) -> Preset:
    preset = presets.get(name)
    if preset is None:
        raise PresetError(
            f"unknown preset {name!r}; known presets: {', '.join(sorted(presets))} "
            "(`specmon presets` lists them)"
        )
    return preset


def preset_listing(presets: Mapping[str, Preset]) -> str:
    """The text `specmon presets` prints: each preset, its seed and the build it was proven on."""
    blocks = []
    for preset in presets.values():
        spec = preset.method or "none"
        if preset.n_spec is not None:
            spec += f", n={preset.n_spec}"
        lines = [
            f"{preset.name}  ({preset.source})",
            f"  {preset.summary}" if preset.summary else "",
            f"  model:      {preset.model}",
            f"  draft:      {preset.draft}" if preset.draft else "",
            f"  method:     {spec}",
            f"  vllm args:  {' '.join(preset.vllm_args)}" if preset.vllm_args else "",
            "  env:        " + " ".join(f"{k}={mask_env(k, v)}" for k, v in preset.env.items())
            if preset.env
            else "",
            "  spec opts:  " + ", ".join(f"{k}={v}" for k, v in preset.spec_options.items())
            if preset.spec_options
            else "",
            f"  needs:      {preset.gpu_memory_gib:g} GiB free GPU memory"
            if preset.gpu_memory_gib
            else "",
            f"  seed:       {preset.seed}" if preset.seed else "",
            f"  proven on:  {preset.proven_on}" if preset.proven_on else "",
            f"  note:       {preset.note}" if preset.note else "",
        ]
        blocks.append("\n".join(line for line in lines if line))
    return "\n\n".join(blocks)
