"""A scriptable stand-in for the `pynvml` module, for tests and benchmarks without a GPU (the app
never uses it: the demo's simulated GPU is the simulator's dcgm-exporter page, sim/gpu_page.py).

`FakeNvml` exposes the pynvml functions and constants that `NvmlSampler` calls, with the same
signatures, units (mW, bytes, °C, MHz) and return shapes (structs with `.total`/`.used`…), and
raises pynvml's own `NVMLError` subclasses, so the sampler's error path is exercised against the
real exception classes. It is injected into the sampler (`NvmlSampler(nvml=FakeNvml(...))`); the
real module is never patched. Every call is counted in `calls` so tests can check caching.

pynvml is imported only for its error classes and constants; loading it needs no driver.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

GIB = 1024**3


@dataclass
class FakeGpu:
    """One fake GPU. Change its attributes between samples to script a scenario.

    Units are NVML's: milliwatts for power, bytes for memory. `not_supported` names pynvml
    functions that raise NotSupported on this GPU; `errors` maps a function name to the NVML
    error code it raises; `lost` makes the GPU's handle lookup fail (NVML_ERROR_GPU_IS_LOST).
    """

    name: str | bytes = "NVIDIA Fake H100"
    uuid: str | bytes = "GPU-00000000-0000-0000-0000-000000000000"
    temperature_c: int = 35
    slowdown_temperature_c: int = 90
    memory_total_bytes: int = 80 * GIB
    memory_used_bytes: int = 1 * GIB
    """Memory in use by processes (v2 `used`, which leaves out the driver's reserved memory)."""
    memory_reserved_bytes: int = 512 * 1024**2
    utilization_pct: int = 0
    memory_utilization_pct: int = 0
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    """The enforced (effective) limit."""
    power_limit_requested_mw: int | None = None
    """The limit set by the administrator (None: the enforced one)."""
    power_default_limit_mw: int = 700_000
    sm_clock_mhz: int = 345
    memory_clock_mhz: int = 2619
    clock_event_reasons: int = 0x1
    not_supported: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False


class FakeNvml:
    """The subset of pynvml that specmon uses, backed by `FakeGpu` objects.

    `library_missing=True` makes `nvmlInit` fail as on a machine without the NVIDIA driver.
    `init_error` is any other NVML error code for `nvmlInit` (e.g. DRIVER_NOT_LOADED).
    `absent` names functions these bindings do not have at all (an older nvidia-ml-py):
    looking them up raises AttributeError. `function_not_found` names functions the "driver"
    lacks (an older driver): calling them raises NVMLError_FunctionNotFound.
    """

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_UNINITIALIZED = pynvml.NVML_ERROR_UNINITIALIZED
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(
        self,
        gpus: Iterable[FakeGpu] | None = None,
        *,
        library_missing: bool = False,
        init_error: int | None = None,
        absent: Iterable[str] = (),
        function_not_found: Iterable[str] = (),
    ) -> None:
        self.gpus: list[FakeGpu] = list(gpus) if gpus is not None else [FakeGpu()]
        self.library_missing = library_missing
        self.init_error = init_error
        self.absent: set[str] = set(absent)
        self.function_not_found: set[str] = set(function_not_found)
        self.calls: Counter[str] = Counter()
        self.initialised = 0

    def __getattribute__(self, name: str) -> Any:
        # Functions listed in `absent` do not exist, as in older bindings.
        if name.startswith("nvml") and name in object.__getattribute__(self, "absent"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # ------------------------------------------------------------ helpers

    def _enter(self, function: str, handle: Any = None) -> FakeGpu | None:
        """Count the call and raise what the scenario says this call raises."""
        self.calls[function] += 1
        if function in self.function_not_found:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if function in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount"):
            return None
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        gpu: FakeGpu = self.gpus[handle.index]
        if function in gpu.not_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if function in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[function])
        return gpu

    # ------------------------------------------------------------ library

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.library_missing:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(index=index)

    # ------------------------------------------------------------ device queries

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        gpu = self._enter("nvmlDeviceGetName", handle)
        assert gpu is not None
        return gpu.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        gpu = self._enter("nvmlDeviceGetUUID", handle)
        assert gpu is not None
        return gpu.uuid

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        gpu = self._enter("nvmlDeviceGetTemperature", handle)
        assert gpu is not None
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature_c

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        gpu = self._enter("nvmlDeviceGetTemperatureThreshold", handle)
        assert gpu is not None
        if threshold != pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.slowdown_temperature_c

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> SimpleNamespace:
        """v1 (no version): `used` includes reserved memory. v2: `used` leaves it out."""
        if version:
            gpu = self._enter("nvmlDeviceGetMemoryInfo_v2", handle)
            assert gpu is not None
            if version != pynvml.nvmlMemory_v2:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            used = gpu.memory_used_bytes
            free = gpu.memory_total_bytes - used - gpu.memory_reserved_bytes
            return SimpleNamespace(
                version=version,
                total=gpu.memory_total_bytes,
                reserved=gpu.memory_reserved_bytes,
                free=free,
                used=used,
            )
        gpu = self._enter("nvmlDeviceGetMemoryInfo", handle)
        assert gpu is not None
        used = gpu.memory_used_bytes + gpu.memory_reserved_bytes
        return SimpleNamespace(
            total=gpu.memory_total_bytes, free=gpu.memory_total_bytes - used, used=used
        )

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> SimpleNamespace:
        gpu = self._enter("nvmlDeviceGetUtilizationRates", handle)
        assert gpu is not None
        return SimpleNamespace(gpu=gpu.utilization_pct, memory=gpu.memory_utilization_pct)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetPowerUsage", handle)
        assert gpu is not None
        return gpu.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetEnforcedPowerLimit", handle)
        assert gpu is not None
        return gpu.power_limit_mw

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetPowerManagementLimit", handle)
        assert gpu is not None
        if gpu.power_limit_requested_mw is None:
            return gpu.power_limit_mw
        return gpu.power_limit_requested_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        assert gpu is not None
        return gpu.power_default_limit_mw

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        gpu = self._enter("nvmlDeviceGetClockInfo", handle)
        assert gpu is not None
        if clock_type == pynvml.NVML_CLOCK_SM:
            return gpu.sm_clock_mhz
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return gpu.memory_clock_mhz
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        assert gpu is not None
        return gpu.clock_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        assert gpu is not None
        return gpu.clock_event_reasons
