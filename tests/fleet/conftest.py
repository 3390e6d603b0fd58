"""Fixtures of the fleet tests: a real Prometheus binary (installed with apt-get when missing;
its absence FAILS the tests in CI, and skips them with the reason shown otherwise) and a factory
that starts Prometheus processes on loopback, stopped at the end of each test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.fleet import StartPrometheus
from tests.support.prometheus import Prometheus, PrometheusUnavailable, find_or_install_prometheus


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    try:
        return find_or_install_prometheus()
    except (PrometheusUnavailable, OSError) as exc:
        if _in_ci():
            pytest.fail(f"the fleet tests need a real Prometheus and none could be had: {exc}")
        pytest.skip(f"no prometheus binary (apt-get install -y prometheus): {exc}")


@pytest.fixture
def start_prometheus(prometheus_bin: str, tmp_path: Path) -> Iterator[StartPrometheus]:
    started: list[Prometheus] = []

    def start(jobs: dict[str, list[str]], **kwargs: object) -> Prometheus:
        workdir = tmp_path / f"prom{len(started)}"
        workdir.mkdir()
        prom = Prometheus(prometheus_bin, workdir, jobs, **kwargs)  # type: ignore[arg-type]
        started.append(prom)
        return prom.start()

    yield start
    for prom in started:
        prom.stop()
