"""`specmon completion bash|zsh|fish`: a completion script generated from the parser (shtab)
that names every subcommand, and that the shell accepts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specmon.cli.main import SUBCOMMANDS, main


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


SUBCOMMAND_PATTERNS = {
    "bash": r"^_shtab_specmon_subparsers=\(.*\b{name}\b.*\)$",  # the list of subcommands
    "zsh": r"^\s+{name}:'",  # one `name:'summary'` line each
    "fish": r"^complete -c specmon .* -a {name} -d ",  # one completion of the command each
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_names_every_subcommand(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(shell, capsys)
    pattern = SUBCOMMAND_PATTERNS[shell]
    missing = [
        name
        for name in SUBCOMMANDS
        if not re.search(pattern.format(name=re.escape(name)), script, re.MULTILINE)
    ]
    assert missing == []
    assert "config" in SUBCOMMANDS and "completion" in SUBCOMMANDS
    assert "--attach" in script and "--theme" in script  # the options, not just the commands


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_shell_accepts_the_script(
    shell: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"specmon.{shell}"
    path.write_text(_script(shell, capsys))
    checked = subprocess.run([program, "-n", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_an_unknown_shell_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "powershell"])
    assert exited.value.code == 2
    assert "invalid choice: 'powershell'" in capsys.readouterr().err
