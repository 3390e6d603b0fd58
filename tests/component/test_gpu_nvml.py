"""The NVML sampler against the fake NVML: field mapping, units, errors, caching, no-GPU."""

from __future__ import annotations

import pynvml
import pytest
from tests.support.fake_nvml import GIB, FakeGpu, FakeNvml

from specmon.core.events import GpuReading, GpuSampled
from specmon.sources.gpu import FIELD_GROUPS, NvmlSampler

MIB = 1024**2


def one_gpu(**overrides) -> tuple[FakeNvml, NvmlSampler]:
    fake = FakeNvml([FakeGpu(**overrides)])
    return fake, NvmlSampler(nvml=fake)


def test_every_field_maps_with_its_unit():
    fake, sampler = one_gpu(
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-1234",
        temperature_c=61,
        slowdown_temperature_c=87,
        memory_total_bytes=81559 * MIB,
        memory_used_bytes=12 * GIB,
        memory_reserved_bytes=600 * MIB,
        utilization_pct=97,
        power_mw=512_345,
        power_limit_mw=700_000,
        sm_clock_mhz=1980,
        memory_clock_mhz=2619,
        clock_event_reasons=0x4,
    )
    event = sampler.sample(12.5)
    assert event == GpuSampled(
        t=12.5,
        source="gpu",
        gpus=(
            GpuReading(
                index=0,
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-1234",
                temperature_c=61.0,
                slowdown_temperature_c=87.0,
                memory_used_bytes=12 * GIB,  # v2: reserved memory left out
                memory_total_bytes=81559 * MIB,
                utilization_pct=97.0,
                power_w=512.345,  # mW -> W
                power_limit_w=700.0,
                power_limit_requested_w=700.0,
                power_limit_default_w=700.0,
                sm_clock_mhz=1980.0,
                memory_clock_mhz=2619.0,
                clock_event_reasons=("sw_power_cap",),
            ),
        ),
        error=None,
    )
    assert fake.initialised == 1


def test_bytes_names_from_old_bindings_are_decoded():
    _, sampler = one_gpu(name=b"Tesla T4", uuid=b"GPU-abc")
    reading = sampler.sample(0.0).gpus[0]
    assert (reading.name, reading.uuid) == ("Tesla T4", "GPU-abc")


def test_init_is_lazy_and_happens_once():
    fake = FakeNvml()
    sampler = NvmlSampler(nvml=fake)
    assert fake.calls["nvmlInit"] == 0
    sampler.sample(0.0)
    sampler.sample(1.0)
    sampler.sample(2.0)
    assert fake.calls["nvmlInit"] == 1
    assert fake.calls["nvmlDeviceGetCount"] == 1


@pytest.mark.parametrize(
    ("function", "field"),
    [
        ("nvmlDeviceGetTemperature", "temperature_c"),
        ("nvmlDeviceGetTemperatureThreshold", "slowdown_temperature_c"),
        ("nvmlDeviceGetUtilizationRates", "utilization_pct"),
        ("nvmlDeviceGetPowerUsage", "power_w"),
        ("nvmlDeviceGetEnforcedPowerLimit", "power_limit_w"),
        ("nvmlDeviceGetName", "name"),
        ("nvmlDeviceGetUUID", "uuid"),
        ("nvmlDeviceGetCurrentClocksEventReasons", "clock_event_reasons"),
    ],
)
def test_a_not_supported_field_is_none_and_the_rest_stay(function, field):
    _, sampler = one_gpu(not_supported={function}, temperature_c=50, power_mw=100_000)
    reading = sampler.sample(0.0).gpus[0]
    assert getattr(reading, field) is None
    others = {
        "temperature_c": 50.0,
        "power_w": 100.0,
        "memory_total_bytes": 80 * GIB,
        "sm_clock_mhz": 345.0,
    }
    for name, value in others.items():
        if name != field:
            assert getattr(reading, name) == value


def test_not_supported_clocks_are_none_never_zero():
    _, sampler = one_gpu(not_supported={"nvmlDeviceGetClockInfo"})
    reading = sampler.sample(0.0).gpus[0]
    assert reading.sm_clock_mhz is None
    assert reading.memory_clock_mhz is None


def test_memory_not_supported_anywhere_is_none():
    _, sampler = one_gpu(not_supported={"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2"})
    reading = sampler.sample(0.0).gpus[0]
    assert (reading.memory_used_bytes, reading.memory_total_bytes) == (None, None)


def test_a_driver_without_memory_info_v2_falls_back_to_v1_and_remembers():
    fake = FakeNvml(
        [FakeGpu(memory_used_bytes=4 * GIB, memory_reserved_bytes=512 * MIB)],
        function_not_found={"nvmlDeviceGetMemoryInfo_v2"},
    )
    sampler = NvmlSampler(nvml=fake)
    first = sampler.sample(0.0).gpus[0]
    sampler.sample(1.0)
    # v1's `used` includes the driver's reserved memory
    assert first.memory_used_bytes == 4 * GIB + 512 * MIB
    assert first.memory_total_bytes == 80 * GIB
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == 2
    assert sampler.memory_info_v2 is False


def test_bindings_without_v2_use_v1():
    fake = FakeNvml([FakeGpu()])
    fake.nvmlMemory_v2 = None  # an old nvidia-ml-py has no such constant
    sampler = NvmlSampler(nvml=fake)
    reading = sampler.sample(0.0).gpus[0]
    assert reading.memory_total_bytes == 80 * GIB
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 0


def test_clock_reasons_fall_back_to_the_older_throttle_name():
    fake = FakeNvml(
        [FakeGpu(clock_event_reasons=0x40)],
        absent={"nvmlDeviceGetCurrentClocksEventReasons"},
    )
    sampler = NvmlSampler(nvml=fake)
    assert sampler.sample(0.0).gpus[0].clock_event_reasons == ("hw_thermal_slowdown",)
    sampler.sample(1.0)
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2
    assert sampler.reasons_function == "nvmlDeviceGetCurrentClocksThrottleReasons"


def test_clock_reasons_fall_back_when_the_driver_lacks_the_new_function():
    fake = FakeNvml(
        [FakeGpu(clock_event_reasons=0x4 | 0x8)],
        function_not_found={"nvmlDeviceGetCurrentClocksEventReasons"},
    )
    sampler = NvmlSampler(nvml=fake)
    assert sampler.sample(0.0).gpus[0].clock_event_reasons == ("sw_power_cap", "hw_slowdown")


def test_no_reason_active_is_an_empty_tuple():
    _, sampler = one_gpu(clock_event_reasons=0)
    assert sampler.sample(0.0).gpus[0].clock_event_reasons == ()


def test_throttle_changes_show_up_sample_by_sample():
    fake, sampler = one_gpu(clock_event_reasons=0x0)
    assert sampler.sample(0.0).gpus[0].clock_event_reasons == ()
    fake.gpus[0].clock_event_reasons = 0x20 | 0x4
    assert sampler.sample(1.0).gpus[0].clock_event_reasons == (
        "sw_power_cap",
        "sw_thermal_slowdown",
    )


def test_static_fields_are_read_once_dynamic_fields_every_sample():
    fake, sampler = one_gpu()
    for second in range(5):
        sampler.sample(float(second))
    for static in (
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetHandleByIndex",
    ):
        assert fake.calls[static] == 1, static
    assert fake.calls["nvmlDeviceGetTemperature"] == 5
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 5
    assert fake.calls["nvmlDeviceGetClockInfo"] == 10


def test_a_not_supported_static_field_is_not_asked_again():
    fake, sampler = one_gpu(not_supported={"nvmlDeviceGetTemperatureThreshold"})
    for second in range(3):
        assert sampler.sample(float(second)).gpus[0].slowdown_temperature_c is None
    assert fake.calls["nvmlDeviceGetTemperatureThreshold"] == 1


def test_a_transient_error_on_a_static_field_is_retried():
    fake, sampler = one_gpu(errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_TIMEOUT})
    assert sampler.sample(0.0).gpus[0].name is None
    fake.gpus[0].errors.clear()
    assert sampler.sample(1.0).gpus[0].name == "NVIDIA Fake H100"
    sampler.sample(2.0)
    assert fake.calls["nvmlDeviceGetName"] == 2


def test_a_lost_gpu_does_not_hide_the_others():
    fake = FakeNvml(
        [
            FakeGpu(name="A", temperature_c=40),
            FakeGpu(name="B", lost=True),
            FakeGpu(name="C", temperature_c=70, errors={"nvmlDeviceGetPowerUsage": 999}),
        ]
    )
    event = NvmlSampler(nvml=fake).sample(0.0)
    assert event.error is None
    assert [g.index for g in event.gpus] == [0, 1, 2]
    assert (event.gpus[0].name, event.gpus[0].temperature_c) == ("A", 40.0)
    assert event.gpus[1] == GpuReading(index=1)  # every field "—"
    assert (event.gpus[2].name, event.gpus[2].temperature_c) == ("C", 70.0)
    assert event.gpus[2].power_w is None
    assert event.gpus[0].power_w == 70.0


def test_a_gpu_that_comes_back_is_read_again():
    fake = FakeNvml([FakeGpu(lost=True)])
    sampler = NvmlSampler(nvml=fake)
    assert sampler.sample(0.0).gpus[0].name is None
    fake.gpus[0].lost = False
    assert sampler.sample(1.0).gpus[0].name == "NVIDIA Fake H100"


def test_missing_library_is_no_gpu_not_an_exception():
    fake = FakeNvml(library_missing=True)
    event = NvmlSampler(nvml=fake).sample(3.0)
    assert event.gpus == ()
    assert event.t == 3.0
    assert event.error is not None
    assert event.error.startswith("no GPU: ")
    assert "Library Not Found" in event.error


def test_driver_not_loaded_is_no_gpu():
    fake = FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    event = NvmlSampler(nvml=fake).sample(0.0)
    assert event.gpus == ()
    assert event.error is not None
    assert event.error.startswith("no GPU: Driver Not Loaded")


def test_zero_gpus_is_no_gpu_and_nvml_is_shut_down():
    fake = FakeNvml([])
    event = NvmlSampler(nvml=fake).sample(0.0)
    assert (event.gpus, event.error) == ((), "no GPU: NVML sees no GPU")
    assert fake.initialised == 0


def test_init_is_retried_only_after_the_retry_interval():
    fake = FakeNvml(library_missing=True)
    sampler = NvmlSampler(nvml=fake, retry_init_s=30.0)
    sampler.sample(0.0)
    sampler.sample(10.0)
    sampler.sample(29.0)
    assert fake.calls["nvmlInit"] == 1
    fake.library_missing = False  # the driver got installed
    event = sampler.sample(30.0)
    assert fake.calls["nvmlInit"] == 2
    assert event.error is None
    assert len(event.gpus) == 1


def test_missing_pynvml_module_is_no_gpu(monkeypatch):
    import importlib

    def refuse(name, *args, **kwargs):
        raise ImportError(f"No module named {name!r}")

    sampler = NvmlSampler()  # no module injected: it will import pynvml lazily
    monkeypatch.setattr(importlib, "import_module", refuse)
    event = sampler.sample(0.0)
    assert event.gpus == ()
    assert event.error is not None
    assert "nvidia-ml-py is not installed" in event.error


def test_an_unexpected_exception_becomes_an_error_sample():
    fake = FakeNvml()

    def broken(handle):
        raise RuntimeError("boom")

    fake.nvmlDeviceGetPowerUsage = broken  # not an NVMLError: a bug somewhere below
    event = NvmlSampler(nvml=fake).sample(1.0)
    assert event.gpus == ()
    assert event.error is not None
    assert "boom" in event.error


def test_close_shuts_nvml_down_and_the_next_sample_initialises_again():
    fake = FakeNvml()
    sampler = NvmlSampler(nvml=fake)
    sampler.sample(0.0)
    sampler.close()
    assert fake.initialised == 0
    assert fake.calls["nvmlShutdown"] == 1
    sampler.close()  # twice is harmless
    assert fake.calls["nvmlShutdown"] == 1
    assert sampler.sample(1.0).gpus[0].name == "NVIDIA Fake H100"
    assert fake.initialised == 1


def test_field_groups_limit_what_is_read():
    fake = FakeNvml()
    reading = NvmlSampler(nvml=fake, groups=("power",)).sample(0.0).gpus[0]
    assert reading.power_w == 70.0
    assert reading.temperature_c is None
    assert reading.memory_total_bytes is None
    assert reading.name == "NVIDIA Fake H100"  # static fields are always read
    assert fake.calls["nvmlDeviceGetTemperature"] == 0
    assert set(FIELD_GROUPS) >= {"power", "temperature", "memory"}


def test_unknown_field_group_is_refused_with_its_name():
    with pytest.raises(ValueError, match="fan"):
        NvmlSampler(nvml=FakeNvml(), groups=("fan",))


def test_the_requested_and_default_power_limits_are_read_beside_the_enforced_one():
    # docs/diagnosis.md, "Thermal-normalised speed": "requested vs effective power limit". An admin
    # asked for 700 W, the GPU enforces 600 W (another cap won); older drivers lack the calls: those
    # fields are None, the rest stay.
    _, sampler = one_gpu(
        power_limit_mw=600_000, power_limit_requested_mw=700_000, power_default_limit_mw=700_000
    )
    reading = sampler.sample(0.0).gpus[0]
    assert (reading.power_limit_w, reading.power_limit_requested_w) == (600.0, 700.0)
    assert reading.power_limit_default_w == 700.0
    _, old = one_gpu(
        not_supported={
            "nvmlDeviceGetPowerManagementLimit",
            "nvmlDeviceGetPowerManagementDefaultLimit",
        }
    )
    reading = old.sample(0.0).gpus[0]
    assert reading.power_limit_requested_w is None and reading.power_limit_default_w is None
    assert reading.power_limit_w == 700.0
