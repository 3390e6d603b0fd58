"""`specmon sim`: bad choices exit 2 with one line; the server runs and stops on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from specmon.cli.main import main
from specmon.sim.profiles import PROFILES


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--profile", "nope"], "gemma4-26b-rtx5090m"),
        (["--schedule", "cycle:5q"], "phases: f=fast"),
        (["--schedule", "sometimes"], "drop-at:N"),
        (["--speed", "0"], "speed must be > 0"),
        (["--n-spec", "-1"], "n_spec"),
        (["--port", "99999"], "port must be 0..65535"),
        (["--port", "-5"], "port must be 0..65535"),
        (["--n-spec", "0", "--per-request-spec-decode-metrics", "summary"], "speculative"),
    ],
)
def test_bad_choices_exit_2_with_one_line(capsys, args, needle) -> None:
    assert main(["sim", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert needle in err


def test_unknown_profile_lists_every_profile(capsys) -> None:
    assert main(["sim", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in PROFILES)


def test_runs_in_the_foreground_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "specmon", "sim", "--port", "0", "--speed", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "SIMULATED" in first
        url = next(word for word in first.split() if word.startswith("http://127.0.0.1:"))
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(url + "/version", timeout=10).json()["simulated"] is True
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_unknown_spec_metrics_level_is_refused_by_the_parser(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sim", "--per-request-spec-decode-metrics", "full"])
    assert exit_.value.code == 2
    assert "choose from 'none', 'summary', 'detailed'" in capsys.readouterr().err


def test_the_spec_metrics_flag_reaches_the_server() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specmon",
            "sim",
            "--port",
            "0",
            "--speed",
            "inf",
            "--per-request-spec-decode-metrics",
            "detailed",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = next(word for word in first.split() if word.startswith("http://127.0.0.1:"))
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30}
        answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=30).json()
        spec = answer["metrics"]["speculative_decoding"]
        assert len(spec["per_step_accepted"]) == spec["num_spec_steps"] > 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
