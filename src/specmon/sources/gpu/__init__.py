"""GPU readings as `GpuSampled` events: local GPUs through NVML, remote ones through dcgm-exporter.

- `NvmlSampler` (nvml.py): local GPUs via nvidia-ml-py; lazy init, NVML errors become None.
- `DcgmSampler` (dcgm.py): a dcgm-exporter `/metrics` URL; imported lazily from here, so the
  NVML path works where httpx or prometheus_client are not installed.
- `run_sampler` (loop.py): the 1 Hz loop that samples in a worker thread and emits (the one
  loop for both samplers; they have no `run` of their own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specmon.sources.gpu.loop import GpuSampler, run_sampler
from specmon.sources.gpu.nvml import FIELD_GROUPS, NvmlSampler

if TYPE_CHECKING:
    from specmon.sources.gpu.dcgm import DcgmSampler, parse_dcgm_page

__all__ = [
    "FIELD_GROUPS",
    "DcgmSampler",
    "GpuSampler",
    "NvmlSampler",
    "make_sampler",
    "parse_dcgm_page",
    "run_sampler",
]

_LAZY = {
    "DcgmSampler": "specmon.sources.gpu.dcgm",
    "parse_dcgm_page": "specmon.sources.gpu.dcgm",
}


def make_sampler(choice: str) -> GpuSampler | None:
    """The sampler for a `--gpu` choice: "local" (NVML), "none" (None) or a dcgm-exporter URL.

    Raises ValueError for anything else."""
    if choice == "none":
        return None
    if choice == "local":
        return NvmlSampler()
    if choice.startswith(("http://", "https://")):
        from specmon.sources.gpu.dcgm import DcgmSampler

        return DcgmSampler(choice)
    raise ValueError(f"--gpu must be local, none or a dcgm-exporter http(s) URL, got {choice!r}")


def __getattr__(name: str) -> Any:
    """Import the dcgm reader (httpx, prometheus_client) on first use."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
