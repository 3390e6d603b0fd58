"""sources.host.checks: vLLM present, its python, port free, GPU memory against a preset."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tests.support.fake_nvml import FakeGpu, FakeNvml

from specmon.sources.gpu import NvmlSampler
from specmon.sources.host.checks import (
    HostCheckError,
    find_vllm,
    gpu_memory_warning,
    pick_free_port,
    port_free,
    vllm_python,
    vllm_version,
)


def test_missing_vllm_prints_the_install_command(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HostCheckError, match=r"pip install 'specmon\[host\]'"):
        find_vllm(None)
    with pytest.raises(HostCheckError, match=r"pip install 'specmon\[host\]'"):
        find_vllm(str(tmp_path / "nope"))


def test_the_python_of_a_console_script_comes_from_its_first_line(fake_vllm: Path, tmp_path):
    import sys

    assert find_vllm(str(fake_vllm)) == fake_vllm
    assert find_vllm(str(tmp_path)) == fake_vllm  # a directory holding it
    assert vllm_python(fake_vllm) == Path(sys.executable)
    assert vllm_version(Path(sys.executable)) is None  # no vllm package in this python
    env_script = tmp_path / "other"
    env_script.write_text("#!/usr/bin/env python3\n")
    assert vllm_python(env_script) is not None
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x7fELF...")
    assert vllm_python(binary) is None


def test_a_listening_port_is_not_free():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not port_free("127.0.0.1", port)
    assert port_free("127.0.0.1", pick_free_port("127.0.0.1"))


def sampler(used_gib: float, total_gib: float = 32.0) -> NvmlSampler:
    gpu = FakeGpu(
        name="NVIDIA GeForce RTX 5090",
        memory_total_bytes=int(total_gib * 2**30),
        memory_used_bytes=int(used_gib * 2**30),
    )
    return NvmlSampler(FakeNvml([gpu]))


def test_gpu_memory_is_checked_against_the_preset_need():
    warning, gpu = gpu_memory_warning(28.0, sampler(used_gib=10.0))
    assert gpu == "NVIDIA GeForce RTX 5090"
    assert warning is not None and "28 GiB" in warning and "22.0 GiB" in warning
    assert gpu_memory_warning(28.0, sampler(used_gib=1.0))[0] is None
    assert gpu_memory_warning(None, sampler(used_gib=31.0))[0] is None


def test_no_gpu_means_no_warning():
    class NoGpu:
        def sample(self, now):
            from specmon.core.events import GpuSampled

            return GpuSampled(t=now, source="gpu", gpus=(), error="NVML not found")

    assert gpu_memory_warning(28.0, NoGpu()) == (None, None)
