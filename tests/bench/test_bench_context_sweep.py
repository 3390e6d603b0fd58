"""`specmon bench --context-sweep`: the bench at several prompt lengths against a simulator whose
acceptance falls with context (`--drift context:...`), and acceptance by context found over all
runs; the plain simulator shows no fall-off."""

from __future__ import annotations

import json

import pytest

from specmon.bench.config import ConfigError
from specmon.bench.context_sweep import parse_lengths
from specmon.cli.main import main
from specmon.sim.server import SimConfig, start_in_thread


def test_lengths_parse_sorted_and_bad_ones_fail() -> None:
    assert parse_lengths("8192, 1024,20480") == (1024, 8192, 20480)
    for bad in ("1024", "1024,x", "0,5", "1024,1024"):
        with pytest.raises(ConfigError):
            parse_lengths(bad)


def _sweep(tmp_path, drift: str | None) -> dict:
    out = tmp_path / "sweep.json"
    with start_in_thread(
        SimConfig(speed=50.0, seed=7, drift=drift, log_interval=0.0), log_sink=lambda _l: None
    ) as sim:
        code = main(
            [
                "bench",
                "--attach",
                sim.url,
                "--context-sweep",
                "64,700",
                "--output-len",
                "200",
                "--num-prompts",
                "3",
                "--ignore-eos",
                "--json",
                str(out),
            ]
        )
    assert code == 0
    return json.loads(out.read_text())["context_sweep"]


def test_the_sweep_finds_where_acceptance_falls_off(tmp_path, capsys) -> None:
    sweep = _sweep(tmp_path, "context:300:600")
    short, long = sweep["points"]
    assert (short["input_len"], long["input_len"]) == (64, 700)
    assert short["completed"] == 3 and long["completed"] == 3
    assert long["acceptance_length"] < 0.6 * short["acceptance_length"]
    assert sweep["context"]["detected"]
    assert "acceptance by context: AL" in capsys.readouterr().out


def test_the_plain_simulator_has_no_fall_off(tmp_path) -> None:
    sweep = _sweep(tmp_path, None)
    assert not sweep["context"]["detected"]
    short, long = sweep["points"]
    assert long["acceptance_length"] == pytest.approx(short["acceptance_length"], rel=0.2)


def test_the_sweep_refuses_a_recording_in_one_line(capsys) -> None:
    code = main(
        ["bench", "--attach", "http://127.0.0.1:9", "--context-sweep", "64,700", "--record", "x"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--context-sweep" in err and err.count("\n") == 1
