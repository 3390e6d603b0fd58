"""The local GPU sampler: reads every GPU through NVML (nvidia-ml-py's `pynvml`) into `GpuSampled`.

How it treats NVML (the nvitop pattern):
- lazy: `pynvml` is imported and `nvmlInit` called on the first `sample()`, not at construction,
  so specmon starts (and imports this module) on machines without a driver or without pynvml;
- one query path, `_query`: every NVML call goes through it, and any `NVMLError` (Not Supported,
  Function Not Found, GPU lost, …) becomes None for that one field — shown "—", never 0;
- versioned shims: memory info v2 (used without the driver's reserved memory) when the driver has
  it, else v1; clock-event reasons under their new name, else the older "throttle reasons" name;
- static fields (name, UUID, power limit, slowdown threshold) are read once per GPU and cached.

No driver, no library, no GPU: `sample()` returns `GpuSampled(gpus=(), error="no GPU: …")`.
Nothing raises out of `sample()`.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from specmon.core.events import GpuReading, GpuSampled
from specmon.core.gpu_reasons import decode_clock_event_reasons
from specmon.core.numbers import as_float, as_int

log = logging.getLogger(__name__)

FIELD_GROUPS: tuple[str, ...] = (
    "temperature",
    "memory",
    "utilization",
    "power",
    "clocks",
    "reasons",
)
"""The dynamic field groups a sample reads (static fields are read once and always)."""

_STATIC_FIELDS = (
    "name",
    "uuid",
    "slowdown_temperature_c",
    "power_limit_w",
    "power_limit_requested_w",
    "power_limit_default_w",
)

CLOSE_WAIT_S = 0.25
"""How long close() waits for a sample that is inside NVML before leaving the shutdown to it."""


@dataclass
class _Failure:
    """Why the last `_query` returned None."""

    kind: str  # "not_supported" | "function_not_found" | "absent" | "error"
    detail: str
    code: int | None = None

    @property
    def permanent(self) -> bool:
        """A failure that will not change while the driver stays the same (worth caching)."""
        return self.kind in ("not_supported", "function_not_found", "absent")


class NvmlSampler:
    """Samples every local GPU through NVML; cheap and synchronous (`run_sampler`: the 1 Hz loop).

    `nvml` is the pynvml module or a stand-in with the same functions (the tests inject the
    `FakeNvml` of tests/support/fake_nvml.py); None imports `pynvml` lazily on the first sample.
    `groups` limits the dynamic fields read (default: all of FIELD_GROUPS); fields outside it
    stay None. After an init failure, init is tried again at most every `retry_init_s` seconds
    of the `now` passed in.
    """

    def __init__(
        self,
        nvml: Any = None,
        *,
        source: str = "gpu",
        groups: Iterable[str] = FIELD_GROUPS,
        retry_init_s: float = 30.0,
    ) -> None:
        self.source = source
        self._nvml = nvml
        self._groups = frozenset(groups)
        unknown = self._groups - set(FIELD_GROUPS)
        if unknown:
            raise ValueError(f"unknown GPU field groups {sorted(unknown)}; known: {FIELD_GROUPS}")
        self._retry_init_s = retry_init_s
        self._lock = threading.Lock()
        self._initialised = False
        self._init_error: str | None = None
        self._init_failed_at: float | None = None
        self._count = 0
        self._handles: dict[int, Any] = {}
        self._static: dict[int, dict[str, Any]] = {}
        self._memory_v2: bool | None = None  # None: not yet tried
        self._reasons_function: str | None = None
        self._logged_missing: set[str] = set()
        self._failure: _Failure | None = None
        self._close_requested = False

    # ------------------------------------------------------------ public

    def sample(self, now: float) -> GpuSampled:
        """Read every GPU now; `now` becomes the event's `t`. Never raises."""
        with self._lock:
            try:
                return self._sample(now)
            except Exception as exc:  # the sampler must never take the hub down
                log.exception("GPU sample failed")
                return GpuSampled(
                    t=now, source=self.source, gpus=(), error=f"GPU sample failed: {exc!r}"
                )
            finally:
                if self._close_requested:  # close() gave up waiting for this sample
                    self._close_requested = False
                    self._shutdown()

    def close(self) -> None:
        """Shut NVML down if this sampler initialised it. A later sample initialises again.

        Bounded: when a sample is still inside NVML (a stuck driver call), close waits at most
        CLOSE_WAIT_S for it and otherwise leaves the shutdown to that sample, which does it as
        soon as it returns. Stopping specmon never waits on the driver."""
        if not self._lock.acquire(timeout=CLOSE_WAIT_S):
            self._close_requested = True
            return
        try:
            self._shutdown()
        finally:
            self._lock.release()

    @property
    def memory_info_v2(self) -> bool | None:
        """Whether memory info v2 is in use (None until a sample has tried it)."""
        return self._memory_v2

    @property
    def reasons_function(self) -> str | None:
        """The NVML function that answered for clock-event reasons (None until one has)."""
        return self._reasons_function

    # ------------------------------------------------------------ init

    def _ensure_init(self, now: float) -> str | None:
        """Initialise NVML once; the reason there is no GPU, or None when ready."""
        if self._initialised:
            return None
        if (
            self._init_failed_at is not None
            and now - self._init_failed_at < self._retry_init_s
            and now >= self._init_failed_at
        ):
            return self._init_error
        error = self._init()
        if error is None:
            self._init_error = None
            self._init_failed_at = None
        else:
            self._init_error = error
            self._init_failed_at = now
        return error

    def _init(self) -> str | None:
        if self._nvml is None:
            try:
                self._nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                return f"no GPU: nvidia-ml-py is not installed ({exc})"
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                return f"no GPU: {exc} (libnvidia-ml.so.1; is the NVIDIA driver installed?)"
            if getattr(exc, "value", None) == nvml.NVML_ERROR_DRIVER_NOT_LOADED:
                return f"no GPU: {exc} (the NVIDIA kernel driver is not running)"
            return f"no GPU: NVML init failed: {exc}"
        except OSError as exc:
            return f"no GPU: NVML could not be loaded: {exc}"
        self._initialised = True
        try:
            self._count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            self._shutdown()
            return f"no GPU: NVML could not count GPUs: {exc}"
        if self._count == 0:
            self._shutdown()
            return "no GPU: NVML sees no GPU"
        return None

    def _shutdown(self) -> None:
        """Shut NVML down if this sampler initialised it (the caller holds the lock)."""
        if not self._initialised:
            return
        self._initialised = False
        self._handles.clear()
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown failed: %r", exc)

    # ------------------------------------------------------------ the one query path

    def _query(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call an NVML function; its result, or None when NVML cannot give it.

        Every NVML error becomes None (and `_failure` says why), so one unsupported field never
        hides the others. A function the bindings or the driver lack is logged once.
        """
        self._failure = None
        nvml = self._nvml
        fn = getattr(nvml, function, None)
        if fn is None:
            self._note_missing(function, "absent")
            return None
        try:
            value = fn(*args, **kwargs)
        except nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == nvml.NVML_ERROR_NOT_SUPPORTED:
                self._failure = _Failure("not_supported", str(exc), code)
            elif code == nvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                self._note_missing(function, "function_not_found")
            else:
                self._failure = _Failure("error", str(exc), code)
            return None
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return value

    def _note_missing(self, function: str, kind: str) -> None:
        self._failure = _Failure(kind, function)
        if function not in self._logged_missing:
            self._logged_missing.add(function)
            log.info("NVML function %s is not available here (%s)", function, kind)

    # ------------------------------------------------------------ sampling

    def _sample(self, now: float) -> GpuSampled:
        error = self._ensure_init(now)
        if error is not None:
            return GpuSampled(t=now, source=self.source, gpus=(), error=error)
        readings = tuple(self._read_gpu(index) for index in range(self._count))
        return GpuSampled(t=now, source=self.source, gpus=readings)

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._query("nvmlDeviceGetHandleByIndex", index)
            if handle is not None:
                self._handles[index] = handle
        return handle

    def _read_gpu(self, index: int) -> GpuReading:
        handle = self._handle(index)
        if handle is None:
            return GpuReading(index=index)
        static = self._read_static(index, handle)
        values: dict[str, Any] = {}
        groups = self._groups
        if "temperature" in groups:
            values["temperature_c"] = as_float(
                self._query("nvmlDeviceGetTemperature", handle, self._nvml.NVML_TEMPERATURE_GPU)
            )
        if "memory" in groups:
            values["memory_used_bytes"], values["memory_total_bytes"] = self._read_memory(handle)
        if "utilization" in groups:
            rates = self._query("nvmlDeviceGetUtilizationRates", handle)
            values["utilization_pct"] = as_float(getattr(rates, "gpu", None))
        if "power" in groups:
            values["power_w"] = _milli(self._query("nvmlDeviceGetPowerUsage", handle))
        if "clocks" in groups:
            values["sm_clock_mhz"] = as_float(
                self._query("nvmlDeviceGetClockInfo", handle, self._nvml.NVML_CLOCK_SM)
            )
            values["memory_clock_mhz"] = as_float(
                self._query("nvmlDeviceGetClockInfo", handle, self._nvml.NVML_CLOCK_MEM)
            )
        if "reasons" in groups:
            values["clock_event_reasons"] = self._read_reasons(handle)
        return GpuReading(index=index, **static, **values)

    def _read_static(self, index: int, handle: Any) -> dict[str, Any]:
        """Name, UUID, slowdown threshold and power limit: read until known, then cached."""
        cached = self._static.setdefault(index, {})
        for name in _STATIC_FIELDS:
            if name in cached:
                continue
            if name == "name":
                value = self._query("nvmlDeviceGetName", handle)
            elif name == "uuid":
                value = self._query("nvmlDeviceGetUUID", handle)
            elif name == "slowdown_temperature_c":
                value = as_float(
                    self._query(
                        "nvmlDeviceGetTemperatureThreshold",
                        handle,
                        self._nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
                    )
                )
            elif name == "power_limit_requested_w":
                value = _milli(self._query("nvmlDeviceGetPowerManagementLimit", handle))
            elif name == "power_limit_default_w":
                value = _milli(self._query("nvmlDeviceGetPowerManagementDefaultLimit", handle))
            else:
                value = _milli(self._query("nvmlDeviceGetEnforcedPowerLimit", handle))
            if value is not None or (self._failure is not None and self._failure.permanent):
                cached[name] = value
        return {name: cached.get(name) for name in _STATIC_FIELDS}

    def _read_memory(self, handle: Any) -> tuple[int | None, int | None]:
        """(used, total) in bytes: memory info v2 when the driver has it, else v1.

        v2's `used` leaves out the memory the driver reserves for itself (as nvidia-smi shows
        it); v1's includes it.
        """
        info = None
        if self._memory_v2 is not False:
            info = self._memory_info_v2(handle)
        if info is None and self._memory_v2 is not True:
            info = self._query("nvmlDeviceGetMemoryInfo", handle)
        if info is None:
            return None, None
        return as_int(getattr(info, "used", None)), as_int(getattr(info, "total", None))

    def _memory_info_v2(self, handle: Any) -> Any:
        """Memory info v2, remembering when the bindings or the driver do not have it."""
        nvml = self._nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is None:
            self._memory_v2 = False
            return None
        try:
            info = self._query("nvmlDeviceGetMemoryInfo", handle, version=version)
        except TypeError:  # older bindings: no `version` argument
            self._memory_v2 = False
            return None
        if info is not None:
            self._memory_v2 = True
        elif self._failure is not None and (
            self._failure.kind in ("absent", "function_not_found")
            or self._failure.code == getattr(nvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", -1)
        ):
            self._memory_v2 = False
        return info

    def _read_reasons(self, handle: Any) -> tuple[str, ...] | None:
        """Decoded clock-event reasons, under the current NVML name or the older one."""
        if self._reasons_function is not None:
            mask = self._query(self._reasons_function, handle)
        else:
            mask = None
            for function in (
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons",
            ):
                mask = self._query(function, handle)
                if mask is not None:
                    self._reasons_function = function
                    break
                if self._failure is None or self._failure.kind not in (
                    "absent",
                    "function_not_found",
                ):
                    break  # the function exists but this GPU cannot answer: no older name helps
        if mask is None:
            return None
        try:
            return decode_clock_event_reasons(int(mask))
        except (TypeError, ValueError):
            return None


def _milli(value: Any) -> float | None:
    """Watts from NVML's milliwatts, or None."""
    number = as_float(value)
    return None if number is None else number / 1000.0
