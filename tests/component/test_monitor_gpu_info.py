"""The session's GPU comes from the GPU sampler's first reading (fake NVML, against the simulator):
SessionInfo.gpu, the snapshot's `session.gpu` and the recording header all name it."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.support.fake_nvml import FakeGpu, FakeNvml

from specmon.cli.main import main
from specmon.core.events import GpuReading, GpuSampled
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Monitor, Target, gpu_name
from specmon.sources.gpu import NvmlSampler, make_sampler
from specmon.sources.recording_player import read_recording


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch):
    """`--gpu local` samples fake NVML GPUs (the names given) instead of the real library."""

    def install(*names: str, **nvml_kwargs) -> FakeNvml:
        nvml = FakeNvml([FakeGpu(name=n) for n in names], **nvml_kwargs)
        monkeypatch.setattr("specmon.sources.gpu.NvmlSampler", lambda: NvmlSampler(nvml=nvml))
        return nvml

    return install


def _settle(monitor: Monitor) -> None:
    """Let the hub loop run what was posted to it before now."""
    monitor.hub.submit(asyncio.sleep(0)).result(10)


def test_first_reading_names_the_gpu_in_info_snapshot_and_recording(sim, fake_gpus, tmp_path):
    nvml = fake_gpus("NVIDIA H200")
    path = tmp_path / "s.ndjson"
    with Monitor(
        [Target(sim.url)], SessionState, gpu=make_sampler("local"), record=path
    ) as monitor:
        info = monitor.start(run_loops=False)
        _settle(monitor)
        snap = monitor.snapshot()
    assert info.gpu == "NVIDIA H200"
    assert snap["session"]["gpu"] == "NVIDIA H200"
    # The reading that named it is in the state and the recording (not sampled twice for it).
    assert [g["name"] for g in snap["gpu"]["gpus"]] == ["NVIDIA H200"]
    assert nvml.calls["nvmlInit"] == 1
    recording = read_recording(path)
    assert recording.info.gpu == "NVIDIA H200"
    samples = [e for e in recording.events if isinstance(e, GpuSampled)]
    assert len(samples) == 1 and samples[0].gpus[0].name == "NVIDIA H200"


def test_watch_once_json_shows_the_gpu_name(sim, fake_gpus, capsys):
    fake_gpus("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert (
        main(
            [
                "watch",
                "--attach",
                sim.url,
                "--gpu",
                "local",
                "--once",
                "--json",
                "--interval",
                "0.1",
            ]
        )
        == 0
    )
    snap = json.loads(capsys.readouterr().out)
    assert snap["session"]["gpu"] == "2 x NVIDIA H100 80GB HBM3"
    assert len(snap["gpu"]["gpus"]) == 2


def test_without_a_driver_the_gpu_is_unknown_and_the_session_still_starts(sim, fake_gpus):
    fake_gpus(library_missing=True)
    with Monitor([Target(sim.url)], SessionState, gpu=make_sampler("local")) as monitor:
        info = monitor.start(run_loops=False)
        _settle(monitor)
        snap = monitor.snapshot()
    assert info.gpu is None
    assert snap["session"]["gpu"] is None
    assert snap["gpu"]["gpus"] == [] and snap["gpu"]["error"]


def test_gpu_name_of_a_sample():
    def sample(*names: str | None) -> GpuSampled:
        gpus = tuple(GpuReading(index=i, name=n) for i, n in enumerate(names))
        return GpuSampled(t=0.0, source="gpu", gpus=gpus)

    assert gpu_name(sample("A")) == "A"
    assert gpu_name(sample("A", "A", "A")) == "3 x A"
    assert gpu_name(sample("A", "B", "A")) == "2 x A, B"
    assert gpu_name(sample(None, "B")) == "B"
    assert gpu_name(sample()) is None
    assert gpu_name(sample(None)) is None
    assert gpu_name(None) is None
