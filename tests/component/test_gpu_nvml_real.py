"""The NVML sampler on the real driver, where there is one (skipped on machines without a GPU).

Checks the readings against nvidia-smi, which reads the same driver through its own code.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from specmon.sources.gpu import NvmlSampler

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def real_sample():
    sampler = NvmlSampler()
    event = sampler.sample(time.monotonic())
    sampler.close()
    if event.error is not None and event.error.startswith("no GPU"):
        pytest.skip(f"no NVIDIA GPU here ({event.error})")
    return event


def test_every_gpu_has_its_core_fields(real_sample):
    assert real_sample.error is None
    assert real_sample.gpus
    for gpu in real_sample.gpus:
        assert gpu.name
        assert gpu.uuid is not None
        assert gpu.uuid.startswith(("GPU-", "MIG-"))
        assert gpu.memory_total_bytes is not None
        assert gpu.memory_total_bytes > 0
        assert gpu.memory_used_bytes is not None
        assert 0 <= gpu.memory_used_bytes <= gpu.memory_total_bytes
        if gpu.temperature_c is not None:
            assert 0 < gpu.temperature_c < 130
        assert gpu.clock_event_reasons is None or isinstance(gpu.clock_event_reasons, tuple)


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="nvidia-smi not installed")
def test_readings_agree_with_nvidia_smi(real_sample):
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,uuid,memory.total,enforced.power.limit",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]
    by_index = {gpu.index: gpu for gpu in real_sample.gpus}
    for index, name, uuid, total_mib, limit_w in rows:
        gpu = by_index[int(index)]
        assert gpu.name == name
        assert gpu.uuid == uuid
        assert gpu.memory_total_bytes is not None
        assert abs(gpu.memory_total_bytes / MIB - float(total_mib)) <= 1
        if gpu.power_limit_w is not None and limit_w not in ("[N/A]", "N/A"):
            assert gpu.power_limit_w == pytest.approx(float(limit_w), abs=1.0)
