"""A real Prometheus (the Debian `prometheus` package) for the fleet tests: found on PATH or
installed with apt-get under a file lock, started on loopback with a generated config."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.support.waiting import wait_for

APT_LOCK = "/tmp/specmon-apt.lock"
SCRAPE_INTERVAL_S = 1.0


class PrometheusUnavailable(RuntimeError):
    """The prometheus binary is not there and could not be installed."""


def find_or_install_prometheus() -> str:
    """The prometheus binary: on PATH (or /usr/bin), else `apt-get install -y prometheus` under
    the machine-wide apt lock (other helpers install packages the same way)."""
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None
    )
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        raise PrometheusUnavailable("prometheus is not on PATH and there is no apt-get")
    cmd = f"{apt} install -y --no-install-recommends prometheus"
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if sudo is None:
            raise PrometheusUnavailable("prometheus is not on PATH; apt-get needs root")
        cmd = f"{sudo} -n {cmd}"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(
        ["flock", APT_LOCK, "-c", cmd], env=env, capture_output=True, text=True, timeout=900
    )
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None
    )
    if found is None:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise PrometheusUnavailable(
            f"apt-get install prometheus failed ({proc.returncode}):\n{tail}"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    """One prometheus process on 127.0.0.1 scraping `jobs` (job name → list of host:port)."""

    binary: str
    workdir: Path
    jobs: dict[str, list[str]]
    scrape_interval_s: float = SCRAPE_INTERVAL_S
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        lines = [
            "global:",
            f"  scrape_interval: {self.scrape_interval_s:g}s",
            f"  scrape_timeout: {self.scrape_interval_s:g}s",
            f"  evaluation_interval: {self.scrape_interval_s:g}s",
            "scrape_configs:",
        ]
        jobs = {"prometheus": [f"127.0.0.1:{self.port}"], **self.jobs}  # a target that is not vLLM
        for job, targets in jobs.items():
            lines += [f"  - job_name: {job}", "    static_configs:", "      - targets:"]
            lines += [f"          - '{t}'" for t in targets] or ["          []"]
        return "\n".join(lines) + "\n"

    def write_config(self) -> Path:
        path = self.workdir / "prometheus.yml"
        path.write_text(self.config_text())
        return path

    def start(self, timeout: float = 60.0) -> Prometheus:
        """Launch the process and wait until it is ready."""
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> Prometheus:
        """Start the process and return at once (`wait_ready` waits for it): several can then
        start side by side, each taking its few seconds before its first scrape at once."""
        config = self.write_config()
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 (kept with the process)
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=2h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def wait_ready(self, timeout: float = 60.0) -> Prometheus:
        """Until /-/ready answers 200; RuntimeError (with the log's tail) if the process exits or
        is not ready within `timeout` s."""
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited at start:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/-/ready", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready within {timeout:g} s:\n{self.log_tail()}")

    def reload(self, jobs: dict[str, list[str]]) -> None:
        """New targets: rewrite the config and ask the running process to reload it."""
        self.jobs = jobs
        self.write_config()
        httpx.post(self.url + "/-/reload", timeout=10.0).raise_for_status()

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def log_tail(self, n: int = 30) -> str:
        path = self.workdir / "prometheus.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])

    def wait_for_scrapes(self, query: str, count: int, timeout: float = 30.0) -> None:
        """Wait until the instant `query` returns at least `count` series."""

        def series() -> int:
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(self.url + "/api/v1/query", params={"query": query}, timeout=5.0)
                if r.status_code == 200:
                    return len(r.json()["data"]["result"])
            return 0

        wait_for(
            lambda: series() >= count,
            f"{query!r} to reach {count} series",
            timeout=timeout,
            interval=0.25,
            detail=self.log_tail,
        )

    def wait_for_counters(self, *server_urls: str, timeout: float = 30.0) -> None:
        """Until the latest sample of each server's `vllm:generation_tokens_total` here equals
        what the server serves now: a scrape after the traffic has landed (a fixed pause of two
        scrape intervals only hoped for it, and on a loaded machine may not be long enough)."""

        def served(url: str) -> float:
            page = httpx.get(url + "/metrics", timeout=5.0).text
            return sum(float(m) for m in _GENERATION_TOKENS.findall(page))

        def stored(url: str) -> float | None:
            instance = url.split("//", 1)[1]
            query = f'sum(vllm:generation_tokens_total{{instance="{instance}"}})'
            with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
                r = httpx.get(self.url + "/api/v1/query", params={"query": query}, timeout=5.0)
                result = r.json()["data"]["result"]
                return float(result[0]["value"][1]) if result else None
            return None

        def behind() -> list[str]:
            return [url for url in server_urls if stored(url) != served(url)]

        wait_for(
            lambda: not behind(),
            "the servers' last counters in the Prometheus",
            timeout=timeout,
            interval=0.25,
            detail=lambda: f"behind: {behind()}\n{self.log_tail()}",
        )


_GENERATION_TOKENS = re.compile(r"^vllm:generation_tokens_total(?:\{[^}]*\})? (\S+)$", re.MULTILINE)
