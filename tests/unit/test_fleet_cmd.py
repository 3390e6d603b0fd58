"""`specmon fleet URL`: the Prometheus fleet as its own command, with `watch --prometheus URL` kept
as its old spelling (the same plan, and one line on stderr naming the command)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specmon.cli import fleet_cmd, watch_cmd
from specmon.cli.main import build_parser, main

DOWN = "http://127.0.0.1:9"  # nothing listens: the read fails at once


def test_watch_prometheus_plans_the_same_fleet_as_specmon_fleet() -> None:
    options = ["--match", '{job="vllm"}', "--rate-window", "30", "--interval", "2", "--once"]
    parser = build_parser()
    alias = watch_cmd.plan_from(parser.parse_args(["watch", "--prometheus", DOWN, *options]))
    fleet = fleet_cmd.plan_from(parser.parse_args(["fleet", DOWN, *options]))
    assert isinstance(alias, fleet_cmd.FleetPlan)
    assert (alias.command, fleet.command) == ("watch", "fleet")
    assert dataclasses.replace(alias, command="fleet") == fleet
    assert fleet.spec().rate_window_s == 30.0 and fleet.spec().interval == 2.0


def test_fleet_reads_every_5_s_by_default() -> None:
    plan = fleet_cmd.plan_from(build_parser().parse_args(["fleet", DOWN]))
    assert plan.interval == fleet_cmd.FLEET_INTERVAL_S == 5.0


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["fleet", DOWN, "--match", "job=x"], "specmon fleet: --match must look like"),
        (["fleet", DOWN, "--bearer-token-file", "/nonexistent/t"], "specmon fleet: --bearer"),
        (["watch", "--prometheus", DOWN, "--match", "job=x"], "specmon watch: --match must"),
    ],
)
def test_bad_fleet_arguments_are_one_line_and_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1


def test_the_alias_says_fleet_is_the_command_then_runs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["fleet", DOWN, "--once", "--json"]) == 1
    fleet = capsys.readouterr()
    assert main(["watch", "--prometheus", DOWN, "--once", "--json"]) == 1
    alias = capsys.readouterr()
    assert json.loads(alias.out)["servers"] == json.loads(fleet.out)["servers"] == {}
    note, error = alias.err.splitlines()
    assert note == watch_cmd.ALIAS_NOTE and "specmon fleet URL" in note
    assert error.startswith("specmon watch: ") and fleet.err.startswith("specmon fleet: ")
