"""The simulated GPU as a dcgm-exporter page (`GET /sim/gpu`), so `specmon demo --drift thermal`
shows the GPU heating and throttling through specmon's own dcgm reader (`sources.gpu.dcgm`), in
another process than the simulator's, exactly as a real dcgm-exporter is read.

The readings follow the engine's thermal drift (`drift.gpu_state`): temperature, SM clock and
power (no memory: the simulator has none to report); the clock-event reasons say "thermal
(software)" once the clock is pulled down, "idle" when nothing runs. The GPU's name starts with
"simulated" so no reading passes for a real one.
"""

from __future__ import annotations

from specmon.sim.drift import BASE_CLOCK_MHZ, THROTTLE_FROM_C, GpuState

SIM_GPU_PATH = "/sim/gpu"
"""Where the simulator serves its GPU page."""
IDLE = 0x001
SW_THERMAL_SLOWDOWN = 0x020


def gpu_page(state: GpuState, gpu_name: str, *, running: int) -> str:
    """dcgm-exporter's text format for one GPU in `state` (the fields specmon's reader uses)."""
    reasons = 0
    if state.sm_clock_mhz < BASE_CLOCK_MHZ:
        reasons |= SW_THERMAL_SLOWDOWN
    if not running:
        reasons |= IDLE
    name = " ".join(f"simulated {gpu_name}".split()).replace('"', "'")
    labels = f'gpu="0",UUID="GPU-5133-0000-0000-0000-000000000000",modelName="{name}"'
    fields = (
        ("DCGM_FI_DEV_GPU_TEMP", state.temperature_c),
        ("DCGM_FI_DEV_SLOWDOWN_TEMP", THROTTLE_FROM_C),
        ("DCGM_FI_DEV_GPU_UTIL", 100 if running else 0),
        ("DCGM_FI_DEV_POWER_USAGE", state.power_w),
        ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", state.power_limit_w),
        ("DCGM_FI_DEV_POWER_MGMT_LIMIT", state.power_limit_w),
        ("DCGM_FI_DEV_SM_CLOCK", state.sm_clock_mhz),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", reasons),
    )
    lines: list[str] = []
    for metric, value in fields:
        lines.append(f"# TYPE {metric} gauge")
        lines.append(f"{metric}{{{labels}}} {value:g}")
    return "\n".join(lines) + "\n"
