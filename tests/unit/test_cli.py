from __future__ import annotations

import subprocess
import sys

from specmon import __version__
from specmon.cli.main import main


def test_version_flag_prints_version(capsys) -> None:
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"specmon {__version__}"


def test_python_dash_m_runs_the_same_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "specmon", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert "usage: specmon" in result.stdout


def test_every_command_runs_from_a_frozen_plan() -> None:
    """Each command is `run(plan_from(args))`: its plan is a frozen dataclass (or one of several),
    and nothing after `plan_from` is handed the parsed arguments."""
    import dataclasses
    import importlib
    import inspect

    from specmon.cli.main import SUBCOMMANDS

    for name in SUBCOMMANDS:
        module = importlib.import_module(f"specmon.cli.{name}_cmd")
        assert callable(module.plan_from) and callable(module.run), name
        (param,) = inspect.signature(module.run).parameters.values()
        assert "Namespace" not in str(param.annotation), name
    from specmon.cli import chat_cmd, fleet_cmd, watch_cmd

    for plan in (chat_cmd.ChatPlan, watch_cmd.WatchPlan, fleet_cmd.FleetPlan):
        assert dataclasses.fields(plan) and plan.__dataclass_params__.frozen  # type: ignore[attr-defined]
